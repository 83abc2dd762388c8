"""diff against a float64 reference written here from the paper (Ye et al. 2024, "Differential Transformer",
eqs. 1-3), one head at a time from the module's parameters only:

    [Q₁; Q₂] = X W_Q, [K₁; K₂] = X W_K, V = X W_V,   d the head width, each half d/2 wide,
    DiffAttn = (softmax(Q₁K₁ᵀ/√(d/2)) − λ softmax(Q₂K₂ᵀ/√(d/2))) V,
    λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init,   λ_init = 0.8 − 0.6·exp(−0.3·(l − 1)),
    head_h = (1 − λ_init) · RMSNorm(DiffAttn_h),   output = out_proj([head_1; ...; head_H]).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from test_attention_reference import assert_close

from attention_lab.attention import AttentionArgumentError, build_attention
from attention_lab.attention.diff import lambda_init
from attention_lab.attention.hooks import capture, intervene, zero_heads
from attention_lab.config import BlockConfig, ModelConfig
from attention_lab.errors import ConfigError
from attention_lab.model import SequenceModel
from attention_lab.run.preflight import check_run
from conftest import compose_config, run_train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def module_of(**options):
    torch.manual_seed(0)
    return build_attention("diff", **{"d_in": 8, "d_out": 8, "num_heads": 2, "causal": True, **options})


def reference_diff(m, x, *, causal):
    """x (B, T, d_in) float64 -> (B, T, d_out), head by head, from the equations above."""
    b, t, _ = x.shape
    d = m.head_dim
    lam_init = 0.8 - 0.6 * math.exp(-0.3 * (m.layer - 1))
    lam = math.exp((m.lambda_q1 @ m.lambda_k1).item()) - math.exp((m.lambda_q2 @ m.lambda_k2).item()) + lam_init
    queries, keys, values = m.W_query(x), m.W_key(x), m.W_value(x)
    groups = m.num_heads // m.kv_heads
    heads = []
    for h in range(m.num_heads):
        kv = h // groups
        q = queries[..., h * d:(h + 1) * d]
        k, v = keys[..., kv * d:(kv + 1) * d], values[..., kv * d:(kv + 1) * d]
        maps = []
        for half in (slice(0, d // 2), slice(d // 2, d)):
            scores = q[..., half] @ k[..., half].transpose(-2, -1) / math.sqrt(d / 2)
            if causal:
                scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
            maps.append(torch.softmax(scores, dim=-1))
        out = (maps[0] - lam * maps[1]) @ v  # (B, T, d)
        rms = torch.sqrt(out.square().mean(-1, keepdim=True) + 1e-5)
        heads.append((1 - lam_init) * out / rms * m.head_norm.weight)
    return m.out_proj(torch.cat(heads, dim=-1))


@pytest.mark.parametrize(("heads", "kv_heads", "causal", "layer"), [
    (1, None, True, 1), (2, None, False, 3), (4, 2, True, 5), (4, 1, False, 2)])
@pytest.mark.parametrize("need_weights", [False, True], ids=["fast", "weights"])
def test_fast_path_weights_path_and_float64_reference_agree(heads, kv_heads, causal, layer, need_weights):
    m = module_of(d_in=16, d_out=16, num_heads=heads, kv_heads=kv_heads, causal=causal, layer=layer).double()
    with torch.no_grad():  # λ away from λ_init, and a norm gain that is not all ones
        for p in (m.lambda_q1, m.lambda_k1, m.lambda_q2, m.lambda_k2, m.head_norm.weight):
            p.add_(torch.randn_like(p) * 0.3)
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    assert_close(m(x, need_weights=need_weights).context, reference_diff(m, x, causal=causal), atol=1e-10)


def test_lambda_init_follows_depth_and_the_model_fills_in_each_layer():
    assert lambda_init(1) == pytest.approx(0.2)
    assert [lambda_init(layer) for layer in (2, 4)] == pytest.approx(
        [0.8 - 0.6 * math.exp(-0.3), 0.8 - 0.6 * math.exp(-0.9)])
    model = SequenceModel(ModelConfig(name="diff", d_model=16, num_heads=2, layers=3, mask="causal",
                                      block=BlockConfig(name="transformer")), vocab_size=10)
    assert [block.attention.layer for block in model.blocks] == [1, 2, 3]
    assert [block.attention.lambda_init for block in model.blocks] == pytest.approx([lambda_init(i) for i in (1, 2, 3)])
    m = module_of(layer=4)
    assert m.logged_values() == {"lambda": pytest.approx(float(m.differential_lambda()))}


def test_the_map_is_the_signed_difference():
    m = module_of(layer=6).double()
    x = torch.randn(2, 12, 8, dtype=torch.float64)
    weights = m(x, need_weights=True).weights
    lam = float(m.differential_lambda())
    # each softmax row sums to 1, so the difference's rows sum to 1 − λ; some entries are negative
    assert_close(weights.sum(-1), torch.full_like(weights.sum(-1), 1 - lam), atol=1e-12)
    assert (weights < 0).any() and (weights > 0).any()
    assert (weights.triu(1) == 0).all()  # causal


@pytest.mark.parametrize("need_weights", [False, True], ids=["fast", "weights"])
def test_a_later_token_never_changes_an_earlier_output(need_weights):
    m = module_of(position="rope")
    x = torch.randn(2, 10, 8)
    before = m(x, need_weights=need_weights).context
    for changed in (0, 5, 9):
        y = x.clone()
        y[:, changed] += torch.randn(2, 8) * 10
        after = m(y, need_weights=need_weights).context
        assert_close(after[:, :changed], before[:, :changed])
        assert not torch.allclose(after[:, changed], before[:, changed])


def test_the_output_is_computed_through_the_map():
    m = module_of().double()
    x = torch.randn(2, 7, 8, dtype=torch.float64)
    fast = m(x).context
    with capture(m) as cache:
        captured = m(x).context
    weights = m(x, need_weights=True).weights
    assert torch.equal(cache["hook_weights"], weights)
    assert_close(captured, fast, atol=1e-10)
    with intervene(m, {"hook_weights": lambda w: w.clone()}):
        assert_close(m(x).context, fast, atol=1e-10)
    bias = m.out_proj.bias.expand_as(fast)
    with intervene(m, {"hook_weights": torch.zeros_like}):  # a zero map: every head's output 0 (the norm keeps it)
        assert_close(m(x).context, bias)
    with intervene(m, {"hook_head_output": zero_heads([0, 1])}):
        assert_close(m(x).context, bias)


def test_every_parameter_gets_a_gradient():
    m = module_of(qkv_bias=True)
    x = torch.randn(2, 6, 8, requires_grad=True)
    m(x).context.square().sum().backward()
    for name, parameter in m.named_parameters():
        assert parameter.grad is not None and parameter.grad.abs().sum() > 0, name


@pytest.mark.parametrize(("options", "argument"), [
    (dict(layer=0), "layer"), (dict(layer=1.5), "layer"), (dict(layer=True), "layer"),
    (dict(d_out=12, num_heads=4), "num_heads"),  # two halves per head: 2·num_heads must divide d_out
    (dict(d_out=8, num_heads=4, position="rope"), "position"),  # each half 1 wide: no pair to rotate
])
def test_bad_arguments_are_refused_naming_the_argument(options, argument):
    with pytest.raises(AttentionArgumentError) as err:
        module_of(**options)
    assert err.value.argument == argument and "\n" not in str(err.value)


def test_the_config_refuses_in_one_line():
    with pytest.raises(ConfigError) as err:  # a head of 6: halves of 3, no pairs for rope to rotate
        check_run(compose_config(["model=diff", "task=copy", "mask=causal", "position=rope", "heads=4", "d_model=24",
                                  "device=cpu"]))
    assert str(err.value).startswith("position=rope is invalid for model=diff") and "\n" not in str(err.value)
    check_run(compose_config(["model=diff", "task=copy", "mask=causal", "position=rope", "heads=3", "d_model=24",
                              "device=cpu"]))
    with pytest.raises(ConfigError) as err:  # 8 heads of 3: no two halves
        check_run(compose_config(["model=diff", "task=copy", "mask=causal", "heads=8", "d_model=24", "device=cpu"]))
    assert str(err.value).startswith("heads=8 is invalid for model=diff") and "\n" not in str(err.value)


def test_it_trains_on_induction_through_the_script_and_logs_lambda_per_layer(tmp_path: Path, single_thread):
    run = tmp_path / "run"
    proc = run_train(run, "model=diff", "task=induction", "mask=causal", "layers=2", "max_steps=8",
                     "task.train_size=128", "task.val_size=32", "trainer.val_check_interval=4",
                     "trainer.log_every_n_steps=2", "~callbacks.attention_maps",
                     "~callbacks.head_score_maps", "ablation=[]")  # no images, no ablations: not looked at
    metrics = json.loads((run / "metrics.json").read_text())
    assert 0.0 <= metrics["val/seq_acc"] <= 1.0 and metrics["val/loss"] > 0
    assert "KV cache per token: " in proc.stdout + proc.stderr
    events = sorted(run.rglob("events.out.tfevents.*"))
    tags = set()
    for path in events:
        accumulator = EventAccumulator(str(path))
        accumulator.Reload()
        tags |= set(accumulator.Tags()["scalars"])
    assert {"diff/lambda/layer0", "diff/lambda/layer1"} <= tags, tags
