"""based's own: the Taylor identity φ(q)·φ(k) = 1 + q·k + (q·k)²/2, checked on the features themselves, and the
window's half of the map beside the Taylor half. Its fast path, weights path and float64 reference (Arora et al.
2024, §3–4: attention_lab.attention.references.based_reference) agree, also at T not a multiple of the chunk, and
causality, hooks, refusals, gradients and training: test_variant_recurrences.py.
"""

from __future__ import annotations

import copy
from fractions import Fraction

import pytest
import torch
from test_attention_reference import assert_close

from attention_lab.attention import build_attention
from attention_lab.attention.based import taylor_features

pytestmark = pytest.mark.usefixtures("one_torch_thread")


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
