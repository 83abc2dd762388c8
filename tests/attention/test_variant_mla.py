"""mla against a float64 reference written here from DeepSeek-V2's equations (section 2.1.2-2.1.3), one head at a
time from the module's parameters only:

    c_KV = W_DKV h,  k_C = W_UK c_KV,  v_C = W_UV c_KV,  k_R = RoPE(W_KR h)            (one k_R for all heads)
    c_Q = W_DQ h (or h),  q_C = W_UQ c_Q,  q_R = RoPE(W_QR c_Q)
    o_h = softmax([q_C,h; q_R,h]·[k_C,h; k_R]ᵀ / √(d_h + d_h^R)) v_C,h,   output = W_O [o_1; ...; o_H]

RoPE here rotates feature i with feature i + d/2 by position · 10000^(−2i/d) (the lab's rotate-half convention).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from test_attention_reference import assert_close

from attention_lab.attention import AttentionArgumentError, build_attention
from attention_lab.attention.hooks import capture, intervene, zero_heads
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


def rope(x):
    """x (..., T, d): position t's pair (i, i + d/2) rotated by t · 10000^(−2i/d), written out."""
    t, d = x.shape[-2], x.shape[-1]
    out = x.clone()
    for pos in range(t):
        for i in range(d // 2):
            angle = pos * 10000 ** (-2 * i / d)
            a, b = x[..., pos, i], x[..., pos, i + d // 2]
            out[..., pos, i] = a * math.cos(angle) - b * math.sin(angle)
            out[..., pos, i + d // 2] = a * math.sin(angle) + b * math.cos(angle)
    return out


def reference_mla(m, x, *, causal):
    t = x.shape[1]
    d, r = m.head_dim, m.rope_dim
    c_q = x if m.W_q_down is None else m.W_q_down(x)
    c_kv = m.W_kv_down(x)  # (B, T, d_c)
    k_c, v_c, q_c = m.W_key(c_kv), m.W_value(c_kv), m.W_query(c_q)
    k_r = rope(m.W_key_rope(x)) if r else None  # (B, T, d_h^R), shared
    q_r = m.W_query_rope(c_q) if r else None
    heads = []
    for h in range(m.num_heads):
        q, k = q_c[..., h * d:(h + 1) * d], k_c[..., h * d:(h + 1) * d]
        if r:
            q = torch.cat([q, rope(q_r[..., h * r:(h + 1) * r])], dim=-1)
            k = torch.cat([k, k_r], dim=-1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d + r)
        if causal:
            scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        heads.append(torch.softmax(scores, dim=-1) @ v_c[..., h * d:(h + 1) * d])
    return m.out_proj(torch.cat(heads, dim=-1))


@pytest.mark.parametrize("options", [
    dict(), dict(position="rope"), dict(position="rope", rope_dim=2, kv_latent=6, q_latent=5),
    dict(num_heads=4, kv_latent=3, causal=False), dict(num_heads=1, position="rope", rope_dim=8, q_latent=4),
], ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()) or "defaults")
@pytest.mark.parametrize("need_weights", [False, True], ids=["fast", "weights"])
def test_fast_path_weights_path_and_float64_reference_agree(options, need_weights):
    m = module_of(qkv_bias=True, **options).double()
    x = torch.randn(2, 9, 16, dtype=torch.float64)
    assert_close(m(x, need_weights=need_weights).context, reference_mla(m, x, causal=m.causal), atol=1e-10)


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
