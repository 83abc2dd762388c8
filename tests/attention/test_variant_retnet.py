"""retnet's own: its map Q Kᵀ ∘ D is signed, not normalised, and decays by γ_h = 1 − 2^(−5−h) per head, and its
GroupNorm leaves each head at mean 0 and variance 1. Its fast path (the parallel form up to ``chunk`` positions,
the chunkwise form beyond), weights path and float64 recurrence (Sun et al. 2023, eq. 1 and 6–8:
attention_lab.attention.references.retnet_reference) agree, and causality, hooks, refusals, gradients and training:
test_variant_recurrences.py.
"""

from __future__ import annotations

import pytest
import torch
from test_attention_reference import assert_close

from attention_lab.attention import build_attention
from attention_lab.attention.hooks import capture

pytestmark = pytest.mark.usefixtures("one_torch_thread")


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
