"""based against a float64 reference written here from the paper (Arora et al. 2024, §3–4): per head, with
q and k after the short convolution and scaled by d'^(-1/4), s_ij = q_i·k_j,

    taylor_i = Σ_{j<=i} (1 + s_ij + s_ij²/2) v_j / Σ_{j<=i} (1 + s_ij + s_ij²/2),
    window_i = Σ_{i−w<j<=i} exp(s_ij) v_j / Σ_{i−w<j<=i} exp(s_ij),    o_i = ½ (taylor_i + window_i),

position by position from the module's parameters (never its code paths), hidden keys left out of every sum; the
map from the same numbers. The fast path (the quadratic form up to ``chunk`` positions, the chunked prefix sums of
the feature map beyond), the weights path and the reference agree, also at T not a multiple of the chunk. The
Taylor identity φ(q)·φ(k) = 1 + q·k + (q·k)²/2 is checked on the features themselves. Causality, hooks,
refusals, gradients and training: test_variant_recurrences.py.
"""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest
import torch

from attention_lab.attention import build_attention
from attention_lab.attention.based import taylor_features
from test_attention_reference import assert_close
from test_variant_mamba2 import short_conv_reference

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def reference_based(m, x, padding):
    """Position by position in float64: (context (B, T, D), map (B, H, T, T))."""
    b, t, d = x.shape
    heads, f, p = m.num_heads, m.feature_dim, d // m.num_heads
    keep = torch.ones(b, t, 1, dtype=x.dtype) if padding is None else (~padding)[..., None].to(x.dtype)
    q, k, v = short_conv_reference(m, x, keep).split([heads * f, heads * f, d], dim=-1)
    q, k = (z.view(b, t, heads, f) / f**0.25 for z in (q, k))  # (B, T, H, d')
    v = v.view(b, t, heads, p)
    visible = keep[..., 0].bool()
    weights = torch.zeros(b, heads, t, t, dtype=x.dtype)
    for n in range(b):
        for h in range(heads):
            for i in range(t):
                seen = visible[n, : i + 1].clone()  # the keys j <= i that are not hidden
                if not seen.any():
                    continue
                s = k[n, : i + 1, h] @ q[n, i, h]  # (i + 1,)
                kernel = (1 + s + s**2 / 2) * seen
                row = kernel / kernel.sum()
                if m.window_size:
                    near = seen & (torch.arange(i + 1) > i - m.window_size)
                    exp = torch.exp(s) * near
                    row = (row + exp / exp.sum()) / 2
                weights[n, h, i, : i + 1] = row
    y = (weights @ v.transpose(1, 2)).transpose(1, 2)  # (B, T, H, P): o_i = Σ_j map[i, j] v_j
    return m.out_proj(y.reshape(b, t, d)), weights


CASES = [  # (heads, T, options): window inside T or not, the quadratic and the chunked forms, no convolution
    (2, 5, dict(window_size=3)),
    (1, 64, dict(window_size=0)),
    (4, 65, dict(feature_dim=4)),
    (2, 150, dict(feature_dim=4, window_size=8)),
    (2, 23, dict(chunk=4, window_size=5)),
    (2, 9, dict(short_conv=0, window_size=2)),
    (1, 30, dict(short_conv=2, chunk=7, window_size=0, feature_dim=5)),
]


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize(("heads", "t", "options"), CASES, ids=[f"h{h}-t{t}-{o}" for h, t, o in CASES])
def test_fast_path_weights_path_and_float64_reference_agree(heads, t, options, padded):
    torch.manual_seed(t)
    module = build_attention("based", d_in=8, d_out=8, num_heads=heads, causal=True, qkv_bias=True, **options)
    module64 = copy.deepcopy(module).double()
    x = torch.randn(2, t, 8)
    padding = (torch.arange(t)[None, :] < torch.tensor([[0], [min(3, t - 1)]])) if padded else None  # left padding
    fast, none = module(x, key_padding_mask=padding)
    slow, weights = module(x, key_padding_mask=padding, need_weights=True)
    with torch.no_grad():
        expected, expected_weights = reference_based(module64, x.double(), padding)
    assert none is None and weights.shape == (2, heads, t, t)
    assert_close(weights, expected_weights)
    assert_close(slow, expected)
    assert_close(fast, expected, atol=2e-5)
    assert (weights.triu(1) == 0).all() and (weights >= 0).all()  # nothing read from a later position
    rows = weights.sum(-1)
    if padded:
        assert (weights[1, :, :, : min(3, t - 1)] == 0).all()  # nor from a hidden one
        rows = rows[..., min(3, t - 1):]  # a query with no visible key reads nothing
    assert_close(rows, torch.ones_like(rows))  # row-stochastic: two normalised halves


def test_the_chunked_form_in_float64_equals_the_quadratic_form():
    """T = 100 in chunks of 16 (not a multiple), window 8: the module's two paths agree to rounding."""
    torch.manual_seed(1)
    module = build_attention("based", d_in=8, d_out=8, num_heads=2, causal=True, chunk=16, window_size=8).double()
    x = torch.randn(2, 100, 8, dtype=torch.float64)
    assert_close(module(x).context, module(x, need_weights=True).context, atol=1e-12)


def test_the_taylor_features_give_one_plus_qk_plus_half_its_square():
    """φ(q)·φ(k) = 1 + q·k + (q·k)²/2: exact in rational arithmetic on integer vectors, to rounding on random ones."""
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randint(-3, 4, (50, 16), generator=g, dtype=torch.float64) for _ in range(2))
    got = (taylor_features(q) * taylor_features(k)).sum(-1)
    for row, value in zip(range(50), got, strict=True):
        s = sum(int(a) * int(b) for a, b in zip(q[row], k[row], strict=True))
        exact = 1 + s + Fraction(s * s, 2)
        assert abs(Fraction(value.item()) - exact) <= exact * Fraction(1, 10**13)
    q, k = (torch.randn(200, 16, generator=g, dtype=torch.float64) for _ in range(2))
    s = (q * k).sum(-1)
    assert_close((taylor_features(q) * taylor_features(k)).sum(-1), 1 + s + s**2 / 2, atol=1e-12, rtol=1e-13)
    assert taylor_features(q).shape == (200, 1 + 16 + 16 * 16)


def test_window_zero_leaves_the_taylor_map_alone_and_the_window_adds_exact_softmax():
    """Past the window the map is the Taylor half only; inside it, the window half is softmax(s) over the window."""
    torch.manual_seed(0)
    module = build_attention("based", d_in=8, d_out=8, num_heads=1, causal=True, window_size=3).double()
    alone = copy.deepcopy(module)
    alone.window_size = 0
    x = torch.randn(1, 12, 8, dtype=torch.float64)
    with_window, taylor = module(x, need_weights=True).weights, alone(x, need_weights=True).weights
    far = torch.ones(12, 12, dtype=torch.bool).tril(-3)  # j <= i - 3: outside the window of 3
    assert_close(with_window[..., far], taylor[..., far] / 2)
    near = with_window - taylor / 2  # the window half, (1, 1, T, T)
    assert_close(near.sum(-1), torch.full((1, 1, 12), 0.5, dtype=torch.float64))
    assert (near[..., far] == 0).all()
