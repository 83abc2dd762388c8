"""mamba2's own: the chunked SSD form equals the quadratic form M X (at lengths below, at and past a chunk and not
a multiple of it), a long sequence of strong decay stays finite, and the decay L is one factor per head and step.
B and C are shared by the heads of a group (``ngroups``, the paper's default 1): the heads of a group with the same
Δ and A have the same map, heads of different groups do not, and the state and the parameters shrink with it.
Its fast path, weights path and float64 recurrence (Dao & Gu 2024, the selective SSM, B and C per group:
attention_lab.attention.references.mamba2_reference) agree, and causality, hooks, refusals, gradients and
training: test_variant_recurrences.py.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_attention_reference import assert_close

from attention_lab.attention import ATTENTION_REGISTRY, AttentionArgumentError, build_attention
from attention_lab.attention.mamba2 import ssd_chunked, ssd_map
from attention_lab.errors import ConfigError
from attention_lab.run.preflight import check_run
from conftest import compose_config

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
    c = module.W_query(x).view(1, 6, 1, 3).transpose(1, 2)  # one group: both heads read the same C and B
    bb = module.W_key(x).view(1, 6, 1, 3).transpose(1, 2)
    step = F.softplus(module.W_dt(x)).transpose(1, 2)  # (1, H, T)
    decay = weights / ((c @ bb.transpose(-2, -1)) * step[..., None, :])  # L, (1, H, T, T)
    # L[i, j] = L[i, k] · L[k, j] for j <= k <= i: a product of per-step factors
    assert_close(decay[0, :, 5, 1], decay[0, :, 5, 3] * decay[0, :, 3, 1])
    assert_close(torch.diagonal(decay, dim1=-2, dim2=-1), torch.ones(1, 2, 6, dtype=torch.float64))
    lower = decay[..., torch.ones(6, 6, dtype=torch.bool).tril()]
    assert (lower <= 1).all() and (lower > 0).all()  # exp(ΔA) in (0, 1]: A < 0, Δ > 0


def same_step_and_decay_in_every_head(module):
    """Every head given head 0's Δ weights and A: what then tells two heads' maps apart is C and B alone."""
    with torch.no_grad():
        module.W_dt.weight.copy_(module.W_dt.weight[:1].expand_as(module.W_dt.weight))
        module.W_dt.bias.fill_(0.1)
        module.A_log.fill_(0.5)
    return module


@pytest.mark.parametrize("ngroups", [1, 2, 4])
def test_the_heads_of_a_group_share_c_and_b(ngroups):
    torch.manual_seed(0)
    module = same_step_and_decay_in_every_head(
        build_attention("mamba2", d_in=8, d_out=8, num_heads=4, causal=True, ngroups=ngroups).double())
    weights = module(torch.randn(1, 9, 8, dtype=torch.float64), need_weights=True).weights[0]  # (H, T, T)
    per_group = 4 // ngroups
    for h in range(1, 4):
        same = torch.allclose(weights[h], weights[0], atol=1e-12)
        assert same == (h < per_group), (ngroups, h)  # the same map within head 0's group, another outside it
    assert module.W_query.out_features == module.W_key.out_features == ngroups * 2  # d_h = 2 per group


@pytest.mark.parametrize("ngroups", [1, 2, 4])
def test_the_state_counts_the_convolved_b_and_c_of_each_group(ngroups):
    """state_size's convolution part is what the built convolution keeps: its last taps − 1 inputs per channel."""
    module = build_attention("mamba2", d_in=16, d_out=16, num_heads=4, causal=True, ngroups=ngroups, short_conv=3)
    state = ATTENTION_REGISTRY["mamba2"].state_size(16, 4, 32, short_conv=3, ngroups=ngroups)
    assert state - 4 * 4 * 4 == 2 * module.short_conv.conv.in_channels  # (3 − 1) inputs of every channel


@pytest.mark.parametrize(("ngroups", "allowed"), [(0, "a positive integer"), (3, "a divisor of num_heads=4"),
                                                   (True, "a positive integer"), (1.0, "a positive integer")])
def test_a_group_count_that_does_not_divide_the_heads_is_refused(ngroups, allowed):
    with pytest.raises(AttentionArgumentError) as err:
        build_attention("mamba2", d_in=8, d_out=8, num_heads=4, causal=True, ngroups=ngroups)
    assert (err.value.argument, err.value.allowed) == ("ngroups", allowed) and "\n" not in str(err.value)
    build_attention("mamba2", d_in=8, d_out=8, num_heads=4, causal=True, ngroups=2)


def test_the_config_refuses_a_bad_group_count_in_one_line():
    with pytest.raises(ConfigError) as err:
        check_run(compose_config(["model=mamba2", "mask=causal", "heads=4", "model.options.ngroups=3", "device=cpu"]))
    assert str(err.value).startswith("model.options.ngroups=3 is invalid for model=mamba2: it must be a divisor of "
                                     "num_heads=4") and "\n" not in str(err.value)
    check_run(compose_config(["model=mamba2", "mask=causal", "heads=4", "model.options.ngroups=2", "device=cpu"]))
