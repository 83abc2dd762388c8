"""mamba2's own: the chunked SSD form equals the quadratic form M X (at lengths below, at and past a chunk and not
a multiple of it), a long sequence of strong decay stays finite, and the decay L is one factor per head and step.
Its fast path, weights path and float64 recurrence (Dao & Gu 2024, the selective SSM:
attention_lab.attention.references.mamba2_reference) agree, and causality, hooks, refusals, gradients and
training: test_variant_recurrences.py.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_attention_reference import assert_close

from attention_lab.attention import build_attention
from attention_lab.attention.mamba2 import ssd_chunked, ssd_map

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.mark.parametrize("t", [1, 7, 16, 33, 100])
@pytest.mark.parametrize("chunk", [1, 4, 16, 64])
def test_chunked_form_equals_the_quadratic_form(t, chunk):
    g = torch.Generator().manual_seed(t * 100 + chunk)
    b, h, n, p = 2, 3, 4, 5
    a = -torch.rand(b, h, t, generator=g, dtype=torch.float64) * 2  # ΔA < 0
    step = torch.rand(b, h, t, generator=g, dtype=torch.float64)
    bb, c = (torch.randn(b, h, t, n, generator=g, dtype=torch.float64) for _ in range(2))
    x = torch.randn(b, h, t, p, generator=g, dtype=torch.float64)
    assert_close(ssd_chunked(x, a, bb, c, step, chunk), ssd_map(a, bb, c, step) @ x, atol=1e-12, rtol=1e-10)


def test_a_long_sequence_decays_without_overflow():
    """Thousands of steps of strong decay: exp of a segment sum, never a ratio of two tiny prefix products."""
    t = 3000
    a = torch.full((1, 1, t), -5.0)
    step = torch.ones(1, 1, t)
    ones = torch.ones(1, 1, t, 1)
    y = ssd_chunked(ones, a, ones, ones, step, 64)
    assert torch.isfinite(y).all()
    assert_close(y[0, 0, -1], torch.tensor([1 / (1 - torch.exp(torch.tensor(-5.0)).item())]), atol=1e-5)


def test_the_decay_is_one_number_per_head_and_step():
    """L ∘ (C Bᵀ): the map's ratio to C·B·Δ is the same decay for every pair (i, j) that spans the same steps."""
    torch.manual_seed(0)
    module = build_attention("mamba2", d_in=6, d_out=6, num_heads=2, causal=True, short_conv=0).double()
    x = torch.randn(1, 6, 6, dtype=torch.float64)
    weights = module(x, need_weights=True).weights
    c = module.W_query(x).view(1, 6, 2, 3).transpose(1, 2)
    bb = module.W_key(x).view(1, 6, 2, 3).transpose(1, 2)
    step = F.softplus(module.W_dt(x)).transpose(1, 2)  # (1, H, T)
    decay = weights / ((c @ bb.transpose(-2, -1)) * step[..., None, :])  # L, (1, H, T, T)
    # L[i, j] = L[i, k] · L[k, j] for j <= k <= i: a product of per-step factors
    assert_close(decay[0, :, 5, 1], decay[0, :, 5, 3] * decay[0, :, 3, 1])
    assert_close(torch.diagonal(decay, dim1=-2, dim2=-1), torch.ones(1, 2, 6, dtype=torch.float64))
    lower = decay[..., torch.ones(6, 6, dtype=torch.bool).tril()]
    assert (lower <= 1).all() and (lower > 0).all()  # exp(ΔA) in (0, 1]: A < 0, Δ > 0
