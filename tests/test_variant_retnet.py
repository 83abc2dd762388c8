"""retnet against a float64 recurrence written here from the paper (Sun et al. 2023, eq. 1 and 6–8):

    S_n = γ_h S_{n−1} + k_nᵀ v_n,    o_n = q_n S_n,    γ_h = 1 − 2^(−5−h),

with k scaled by 1/√d, then GroupNorm per head (mean 0, variance 1 over each head's d_v at each position) and
out_proj, step by step from the module's projections only (never its code paths); the implied map
(Q Kᵀ ∘ D)[n, m] = γ^(n−m) q_n·k_m from the same numbers. The fast path (the parallel form up to ``chunk``
positions, the chunkwise form beyond), the weights path and the recurrence agree, at lengths below, at and past a
chunk and not a multiple of it. Causality, hooks, refusals, gradients and training: test_variant_recurrences.py.
"""

from __future__ import annotations

import copy

import pytest
import torch

from attention_lab.attention import build_attention
from attention_lab.attention.hooks import capture
from test_attention_reference import assert_close

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def reference_retnet(m, x, padding):
    """The recurrence in float64 loops: (context (B, T, D), map (B, H, T, T)). A hidden position is skipped."""
    b, t, d = x.shape
    heads, p = m.num_heads, d // m.num_heads
    visible = torch.ones(b, t, dtype=torch.bool) if padding is None else ~padding
    q, k, v = (w(x).view(b, t, heads, p) for w in (m.W_query, m.W_key, m.W_value))  # (B, T, H, P)
    k = k / p**0.5
    y = torch.zeros(b, t, heads, p, dtype=x.dtype)
    weights = torch.zeros(b, heads, t, t, dtype=x.dtype)
    for n in range(b):
        for h in range(heads):
            gamma = 1 - 2 ** (-5 - h)
            state = torch.zeros(p, p, dtype=x.dtype)  # (d, d_v)
            for i in range(t):
                if visible[n, i]:
                    state = gamma * state + torch.outer(k[n, i, h], v[n, i, h])
                out = q[n, i, h] @ state
                y[n, i, h] = (out - out.mean()) / torch.sqrt(out.var(unbiased=False) + 1e-6)  # GroupNorm, no affine
                # Row i, every visible j <= i at once: γ to the number of visible steps after j up to i
                seen = visible[n, : i + 1].to(x.dtype)  # (i + 1,)
                after = seen.flip(0).cumsum(0).flip(0) - seen
                weights[n, h, i, : i + 1] = gamma**after * (k[n, : i + 1, h] @ q[n, i, h]) * seen
    return m.out_proj(y.reshape(b, t, d)), weights


CASES = [  # (heads, T, options): the parallel form, one chunk exactly, past it, several chunks, tiny chunks
    (2, 5, {}),
    (1, 64, {}),
    (4, 65, {}),
    (2, 150, {}),
    (2, 23, dict(chunk=4)),
    (3, 12, dict(chunk=5)),
]


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize(("heads", "t", "options"), CASES, ids=[f"h{h}-t{t}-{o}" for h, t, o in CASES])
def test_fast_path_weights_path_and_float64_recurrence_agree(heads, t, options, padded):
    torch.manual_seed(t)
    module = build_attention("retnet", d_in=12, d_out=12, num_heads=heads, causal=True, qkv_bias=True, **options)
    module64 = copy.deepcopy(module).double()
    x = torch.randn(2, t, 12)
    padding = (torch.arange(t)[None, :] < torch.tensor([[0], [min(3, t - 1)]])) if padded else None  # left padding
    fast, none = module(x, key_padding_mask=padding)
    slow, weights = module(x, key_padding_mask=padding, need_weights=True)
    with torch.no_grad():
        expected, expected_weights = reference_retnet(module64, x.double(), padding)
    assert none is None and weights.shape == (2, heads, t, t)
    assert_close(weights, expected_weights, atol=1e-5)
    assert_close(slow, expected, atol=1e-4)
    assert_close(fast, expected, atol=1e-4)
    assert (weights.triu(1) == 0).all()  # nothing read from a later position
    if padded:
        assert (weights[1, :, :, : min(3, t - 1)] == 0).all()  # nor from a hidden one


def test_the_chunkwise_form_in_float64_equals_the_parallel_form():
    """T = 100 in chunks of 16 (not a multiple): the module's two paths agree to rounding."""
    torch.manual_seed(1)
    module = build_attention("retnet", d_in=8, d_out=8, num_heads=2, causal=True, chunk=16).double()
    x = torch.randn(2, 100, 8, dtype=torch.float64)
    assert_close(module(x).context, module(x, need_weights=True).context, atol=1e-12)


def test_the_map_is_signed_unnormalised_and_decays_by_gamma_per_head():
    """(Q Kᵀ ∘ D): its ratio to q_n·k_m/√d is γ_h^(n−m), with γ = 1 − 1/32, 1 − 1/64, ... for heads 0, 1, ..."""
    torch.manual_seed(0)
    module = build_attention("retnet", d_in=16, d_out=16, num_heads=4, causal=True).double()
    x = torch.randn(1, 9, 16, dtype=torch.float64)
    weights = module(x, need_weights=True).weights  # (1, 4, 9, 9)
    q = module.W_query(x).view(1, 9, 4, 4).transpose(1, 2)
    k = module.W_key(x).view(1, 9, 4, 4).transpose(1, 2) / 2  # 1/√d, d = 4
    decay = weights / (q @ k.transpose(-2, -1))  # D: (1, H, T, T)
    distance = (torch.arange(9)[:, None] - torch.arange(9)[None, :]).clamp(min=0).double()
    gammas = torch.tensor([1 - 1 / 32, 1 - 1 / 64, 1 - 1 / 128, 1 - 1 / 256], dtype=torch.float64)
    lower = torch.ones(9, 9, dtype=torch.bool).tril()
    assert_close(decay[0][:, lower], (gammas[:, None, None] ** distance)[:, lower], atol=1e-12)
    assert (weights < 0).any() and not torch.allclose(weights.sum(-1), torch.ones(1, 4, 9, dtype=torch.float64))


def test_the_group_norm_leaves_each_head_at_mean_zero_and_unit_variance():
    torch.manual_seed(0)
    module = build_attention("retnet", d_in=8, d_out=8, num_heads=2, causal=True)
    x = torch.randn(2, 10, 8) * 10  # heads far above the norm's eps, whose variance is then 1 to 1e-3
    with capture(module, points=["head_output"]) as cache:
        module(x)
    heads = cache["hook_head_output"]  # (B, H, T, d_v)
    assert_close(heads.mean(-1), torch.zeros(2, 2, 10), atol=1e-5)
    assert_close(heads.var(-1, unbiased=False), torch.ones(2, 2, 10), atol=1e-3)
