"""mla against a float64 reference written from DeepSeek-V2's equations (section 2.1.2-2.1.3, and the RMSNorm on
the latents of section 3.1.2), one head at a time from the module's parameters only:
attention_lab.attention.references.mla_reference, with and without ``latent_norm``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from test_attention_reference import assert_close

from attention_lab.attention import AttentionArgumentError, build_attention
from attention_lab.attention.hooks import capture, intervene, zero_heads
from attention_lab.attention.references import mla_reference
from attention_lab.checks import validate
from attention_lab.config import BlockConfig, ModelConfig
from attention_lab.errors import ConfigError
from attention_lab.model import SequenceModel
from attention_lab.run.preflight import check_run
from conftest import compose_config, run_train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def module_of(**options):
    torch.manual_seed(0)
    return build_attention("mla", **{"d_in": 16, "d_out": 16, "num_heads": 2, "causal": True, **options})


@pytest.mark.parametrize("options", [
    dict(), dict(position="rope"), dict(position="rope", rope_dim=2, kv_latent=6, q_latent=5),
    dict(num_heads=4, kv_latent=3, causal=False), dict(num_heads=1, position="rope", rope_dim=8, q_latent=4),
    dict(position="rope", q_latent=5, latent_norm=False), dict(kv_latent=6, latent_norm=False),
], ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "defaults")
@pytest.mark.parametrize("need_weights", [False, True], ids=["fast", "weights"])
def test_fast_path_weights_path_and_float64_reference_agree(options, need_weights):
    m = module_of(qkv_bias=True, **options).double()
    if m.kv_norm is not None:  # a learned scale away from its initial ones, so that the reference must apply it
        with torch.no_grad():
            for norm in (m.kv_norm, m.q_norm):
                if norm is not None:
                    norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    assert_close(m(x, need_weights=need_weights).context, mla_reference(m, x, causal=m.causal), atol=1e-10)


@pytest.mark.parametrize("latent_norm", [True, False])
def test_the_latents_are_normalised_before_they_are_expanded(latent_norm):
    """With the RMSNorm, scaling the down-projections scales the latents and changes nothing after them; without
    it, the keys, values and queries scale with them."""
    m = module_of(q_latent=6, latent_norm=latent_norm).double()
    assert (m.kv_norm is not None, m.q_norm is not None) == (latent_norm, latent_norm)
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    before = m(x).context
    with torch.no_grad():
        m.W_kv_down.weight.mul_(7.0)
        m.W_q_down.weight.mul_(3.0)
    after = m(x).context
    assert torch.allclose(after, before, atol=1e-4) == latent_norm  # (up to ε in the norm)


def test_the_norms_add_only_their_scales():
    plain, normed = module_of(q_latent=6, latent_norm=False), module_of(q_latent=6)
    assert sum(p.numel() for p in normed.parameters()) - sum(p.numel() for p in plain.parameters()) == 32 + 6
    shared = dict(plain.named_parameters())
    for name, weight in normed.named_parameters():  # the same seed builds the same projections
        assert name.split(".")[0] in ("kv_norm", "q_norm") or torch.equal(weight, shared[name]), name


def test_the_kv_cache_holds_the_latent_and_one_rope_key():
    assert module_of(position="rope", kv_latent=12, rope_dim=4).kv_cache_per_token() == 12 + 4
    assert module_of(kv_latent=12).kv_cache_per_token() == 12  # no RoPE part without position=rope
    m = module_of(position="rope")  # the defaults: d_c = 4·d_h, d_h^R = d_h / 2
    assert (m.kv_latent, m.rope_dim, m.kv_cache_per_token()) == (32, 4, 36)
    gqa = build_attention("multihead", d_in=16, d_out=16, num_heads=4, kv_heads=2)
    assert gqa.kv_cache_per_token() == 2 * 2 * 4  # a key and a value per kv head
    model = SequenceModel(ModelConfig(name="mla", d_model=16, num_heads=2, layers=3, mask="causal",
                                      options={"kv_latent": 5}, block=BlockConfig(name="transformer")), vocab_size=10)
    assert model.kv_cache_per_token() == 3 * 5


@pytest.mark.parametrize("need_weights", [False, True], ids=["fast", "weights"])
def test_a_later_token_never_changes_an_earlier_output(need_weights):
    m = module_of(position="rope", q_latent=6)
    x = torch.randn(2, 10, 16)
    before = m(x, need_weights=need_weights).context
    for changed in (0, 5, 9):
        y = x.clone()
        y[:, changed] += torch.randn(2, 16) * 10
        after = m(y, need_weights=need_weights).context
        assert_close(after[:, :changed], before[:, :changed])
        assert not torch.allclose(after[:, changed], before[:, changed])


def test_the_rope_part_makes_scores_depend_on_relative_position_only():
    m = module_of(position="rope", kv_latent=4).double()
    x = torch.randn(1, 6, 16, dtype=torch.float64)
    shifted = torch.cat([torch.randn(1, 3, 16, dtype=torch.float64), x], dim=1)  # the same tokens, 3 later
    with capture(m) as cache:
        m(x)
    scores = cache["hook_scores"]
    with capture(m) as cache:
        m(shifted)
    assert_close(cache["hook_scores"][..., 3:, 3:], scores, atol=1e-10)


def test_the_output_is_computed_through_the_map():
    m = module_of(position="rope").double()
    x = torch.randn(2, 7, 16, dtype=torch.float64)
    fast = m(x).context
    with intervene(m, {"hook_weights": lambda w: w.clone()}):
        assert_close(m(x).context, fast, atol=1e-10)
    bias = m.out_proj.bias.expand_as(fast)
    with intervene(m, {"hook_weights": torch.zeros_like}):
        assert_close(m(x).context, bias)
    with intervene(m, {"hook_head_output": zero_heads([0, 1])}):
        assert_close(m(x).context, bias)
    weights = m(x, need_weights=True).weights
    assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))


@pytest.mark.parametrize(("options", "argument"), [
    (dict(kv_heads=1), "kv_heads"),  # the latent is what replaces grouped keys and values
    (dict(kv_latent=0), "kv_latent"), (dict(kv_latent=2.5), "kv_latent"), (dict(q_latent=-1), "q_latent"),
    (dict(rope_dim=4), "rope_dim"),  # a RoPE part needs position=rope
    (dict(position="rope", rope_dim=3), "rope_dim"), (dict(position="rope", rope_dim=True), "rope_dim"),
    (dict(latent_norm="yes"), "latent_norm"),
])
def test_bad_arguments_are_refused_naming_the_argument(options, argument):
    with pytest.raises(AttentionArgumentError) as err:
        module_of(**options)
    assert err.value.argument == argument and "\n" not in str(err.value)


def test_the_config_refuses_in_one_line():
    with pytest.raises(ConfigError) as err:
        validate(compose_config(["model=mla", "task=copy", "mask=causal", "kv_heads=2"]))
    assert str(err.value).startswith("kv_heads=2 is invalid for model=mla") and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"^model\.options\.rope_dim=4 is invalid for model=mla: it must be "):
        check_run(compose_config(["model=mla", "task=copy", "mask=causal", "model.options.rope_dim=4", "device=cpu"]))
    check_run(compose_config(["model=mla", "task=copy", "mask=causal", "position=rope", "model.options.rope_dim=4",
                              "device=cpu"]))


def test_it_trains_on_induction_through_the_script(tmp_path: Path, single_thread):
    run = tmp_path / "run"
    proc = run_train(run, "model=mla", "task=induction", "mask=causal", "layers=2", "position=rope", "max_steps=8",
                     "model.options.kv_latent=8", "model.options.rope_dim=4", "task.train_size=128",
                     "task.val_size=32", "trainer.val_check_interval=4", "~callbacks.attention_maps",
                     "~callbacks.head_score_maps", "ablation=[]")  # no images, no ablations: not looked at
    metrics = json.loads((run / "metrics.json").read_text())
    assert 0.0 <= metrics["val/seq_acc"] <= 1.0 and metrics["val/loss"] > 0
    assert "KV cache per token: 24 numbers over 2 layers" in proc.stdout + proc.stderr  # 2 × (8 + 4)
