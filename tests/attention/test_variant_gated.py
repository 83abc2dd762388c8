"""gated attention (Qiu et al. 2025): Y' = Y ⊙ σ(X W_θ) on each head's output before out_proj, elementwise or
headwise; a float64 reference from the equation, causality, hooks (they see the gated head outputs), config
rejection, the logged mean gate, and training through the script."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from test_attention_reference import assert_close

from attention_lab.attention import AttentionArgumentError, build_attention
from attention_lab.attention.hooks import capture, intervene, zero_heads
from attention_lab.callbacks.module_values import layer_tag
from attention_lab.checks import validate
from attention_lab.errors import ConfigError
from conftest import compose_config, run_train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def module_of(gate: str, **kwargs) -> torch.nn.Module:
    torch.manual_seed(0)
    return build_attention("gated", d_in=8, d_out=8, num_heads=2, gate=gate, **kwargs).double()


@torch.no_grad()
def reference_gated(module, x, causal: bool):
    """Per position and head: softmax attention Y_i = Σ_j softmax_j(q_i·k_j/√d) v_j (j <= i when causal), the gate
    g_i = σ(x_i W_θ + b_θ), one per dimension (elementwise) or one per head (headwise), then out_proj(Y ⊙ g)."""
    b, t, _ = x.shape
    h, d = module.num_heads, module.head_dim
    q, k, v = (w(x).view(b, t, h, d) for w in (module.W_query, module.W_key, module.W_value))
    gate_logits = module.W_gate(x)
    out = torch.zeros(b, t, h, d, dtype=torch.float64)
    for batch in range(b):
        for head in range(h):
            for i in range(t):
                keys = range(i + 1) if causal else range(t)
                e = {j: math.exp(float(q[batch, i, head] @ k[batch, j, head]) / math.sqrt(d)) for j in keys}
                y = sum(e[j] / sum(e.values()) * v[batch, j, head] for j in keys)
                if module.gate == "elementwise":
                    g = torch.sigmoid(gate_logits[batch, i, head * d:(head + 1) * d])
                else:
                    g = torch.sigmoid(gate_logits[batch, i, head])
                out[batch, i, head] = y * g
    return module.out_proj(out.reshape(b, t, h * d))


@pytest.mark.parametrize("gate", ["elementwise", "headwise"])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("sink", ["none", "learned"])
def test_both_paths_match_the_float64_reference(gate, causal, sink):
    module = module_of(gate, causal=causal, sink=sink)
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    fast, (explicit, weights) = module(x).context, module(x, need_weights=True)
    assert_close(explicit, fast, atol=1e-12)
    if sink == "none":
        assert_close(fast, reference_gated(module, x, causal), atol=1e-10)
        assert_close(weights.sum(-1), torch.ones(2, 2, 6, dtype=torch.float64), atol=1e-12)
    assert module.W_gate.out_features == (8 if gate == "elementwise" else 2)


def test_the_gate_changes_the_output_and_a_saturated_gate_is_multihead():
    """With W_θ = 0 and a large bias, σ = 1: gated is multihead with the same weights."""
    gated = module_of("elementwise", causal=True)
    torch.manual_seed(0)
    plain = build_attention("multihead", d_in=8, d_out=8, num_heads=2, causal=True).double()
    x = torch.randn(1, 5, 8, dtype=torch.float64)
    assert not torch.allclose(gated(x).context, plain(x).context)
    with torch.no_grad():
        gated.W_gate.weight.zero_()
        gated.W_gate.bias.fill_(50.0)
    assert_close(gated(x).context, plain(x).context, atol=1e-12)


@pytest.mark.parametrize("gate", ["elementwise", "headwise"])
def test_a_future_token_changes_no_earlier_output(gate):
    module = module_of(gate, causal=True)
    x = torch.randn(1, 6, 8, dtype=torch.float64)
    changed = x.clone()
    changed[:, 4] += 1.0
    for need_weights in (False, True):
        before, after = module(x, need_weights=need_weights).context, module(changed, need_weights=need_weights).context
        assert torch.equal(before[:, :4], after[:, :4]) and not torch.allclose(before[:, 4:], after[:, 4:])


@pytest.mark.parametrize("gate", ["elementwise", "headwise"])
def test_hooks_see_the_map_and_the_gated_head_outputs(gate):
    module = module_of(gate, causal=True)
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    fast = module(x).context
    with capture(module) as cache:
        module(x)
    with intervene(module, {"hook_weights": lambda w: w.clone()}):
        assert_close(module(x).context, fast, atol=1e-12)
    bias = module.out_proj.bias.expand_as(fast)
    with intervene(module, {"hook_weights": torch.zeros_like}):
        assert_close(module(x).context, bias)
    with intervene(module, {"hook_head_output": zero_heads([0, 1])}):
        assert_close(module(x).context, bias)
    # What hook_head_output sees is the gated output: out_proj of it is the module's output.
    head_output = cache["hook_head_output"]  # (B, H, T, d)
    assert_close(module.out_proj(head_output.transpose(1, 2).reshape(2, 6, 8)), fast, atol=1e-12)


def test_the_mean_gate_per_head_is_logged_after_training_steps_only():
    module = module_of("headwise", causal=True)
    x = torch.randn(2, 5, 8, dtype=torch.float64)
    module.eval()
    module(x)
    assert module.logged_values() == {}  # no training batch yet
    module.train()
    module(x)
    values = module.logged_values()
    gate = torch.sigmoid(module.W_gate(x)).mean(dim=(0, 1))  # (H,): the mean over the batch and positions
    assert list(values) == ["gate/head0", "gate/head1"]
    assert_close(torch.tensor([values["gate/head0"], values["gate/head1"]]).double(), gate, atol=1e-6)
    assert layer_tag("gated", 1, "gate/head0") == "gated/gate/layer1/head0"
    assert layer_tag("diff", 0, "lambda") == "diff/lambda/layer0"


@pytest.mark.parametrize("options", [{"gate": "bogus"}, {"gate": None}, {"sink": "bogus"}])
def test_bad_options_are_rejected(options):
    with pytest.raises(AttentionArgumentError) as err:
        build_attention("gated", d_in=8, d_out=8, num_heads=2, **options)
    assert err.value.argument == next(iter(options))


@pytest.mark.parametrize(("extra", "setting"), [
    (["model=gated", "model.options.gate=bogus"], "model.options.gate=bogus"),
    (["model=gated", "model.options.sink=bogus"], "model.options.sink=bogus"),
])
def test_bad_settings_are_one_line(extra, setting):
    with pytest.raises(ConfigError) as err:
        validate(compose_config(extra))
    assert setting in str(err.value) and "\n" not in str(err.value)


def test_it_trains_on_induction_through_the_script_and_logs_its_gates(tmp_path: Path, single_thread):
    run = tmp_path / "run"
    run_train(run, "model=gated", "task=induction", "mask=causal", "layers=2", "max_steps=8",
              "task.train_size=128", "task.val_size=32", "trainer.val_check_interval=4", "~callbacks.attention_maps",
              "~callbacks.head_score_maps", "ablation=[]")  # no images, no ablations: not looked at
    metrics = json.loads((run / "metrics.json").read_text())
    assert 0.0 <= metrics["val/seq_acc"] <= 1.0 and metrics["val/loss"] > 0
    tags = set()
    for events in (run / "tensorboard").rglob("events.out.tfevents.*"):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        tags |= set(accumulator.Tags()["scalars"])
    assert {f"gated/gate/layer{layer}/head{head}" for layer in range(2) for head in range(4)} <= tags
