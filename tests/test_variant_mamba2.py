"""mamba2 against a float64 recurrence written here from the paper (Dao & Gu 2024, eq. for the selective SSM):

    h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t x_tᵀ,    y_t = h_tᵀ C_t,

step by step, from the module's parameters only (never its code paths); the implied map M[i, j] from the same
products. The fast path (the quadratic dual form up to ``chunk`` positions, the chunked form beyond), the weights
path and the reference agree, at lengths below, at and past a chunk and not a multiple of it.
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from attention_lab.attention import build_attention
from attention_lab.attention.mamba2 import ssd_chunked, ssd_map
from test_attention_reference import assert_close

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def short_conv_reference(m, x, keep):
    """SiLU(bias + Σ_τ w_τ u_{t-τ}) per channel of u = [W_query x, W_key x, W_value x], hidden inputs zeroed."""
    u = torch.cat([m.W_query(x), m.W_key(x), m.W_value(x)], dim=-1) * keep  # (B, T, 3D)
    conv = m.short_conv.conv
    if conv is None:
        return u
    taps = conv.weight.shape[-1]
    out = conv.bias.expand_as(u).clone()
    for tau in range(taps):  # lag tau reads u_{t - tau}; the filter's last tap is lag 0 (cross-correlation)
        shifted = F.pad(u, (0, 0, tau, 0))[:, : u.shape[1]]
        out = out + conv.weight[:, 0, taps - 1 - tau] * shifted
    return F.silu(out)


def reference_mamba2(m, x, padding):
    """The recurrence in float64 loops: (context (B, T, D), map (B, H, T, T))."""
    b, t, d = x.shape
    heads, p = m.num_heads, d // m.num_heads
    keep = torch.ones(b, t, 1, dtype=x.dtype) if padding is None else (~padding)[..., None].to(x.dtype)
    c, bb, xx = short_conv_reference(m, x, keep).split(d, dim=-1)
    c, bb, xx = (z.view(b, t, heads, p) for z in (c, bb, xx))  # (B, T, H, P)
    step = F.softplus(m.W_dt(x)) * keep  # (B, T, H): a hidden position is skipped
    a = -torch.exp(m.A_log)  # (H,)
    y = torch.zeros(b, t, heads, p, dtype=x.dtype)
    weights = torch.zeros(b, heads, t, t, dtype=x.dtype)
    for n in range(b):
        for h in range(heads):
            state = torch.zeros(p, p, dtype=x.dtype)  # (N, P)
            for i in range(t):
                state = torch.exp(step[n, i, h] * a[h]) * state + step[n, i, h] * torch.outer(bb[n, i, h], xx[n, i, h])
                y[n, i, h] = state.T @ c[n, i, h]
                # Row i, every j <= i at once: M[i, j] = (C_i·B_j) Δ_j Π_{k=j+1..i} exp(Δ_k A), the product's
                # exponent the sum of the steps after j up to i (the steps from j on, less Δ_j)
                steps = step[n, : i + 1, h]  # (i + 1,)
                after = steps.flip(0).cumsum(0).flip(0) - steps
                weights[n, h, i, : i + 1] = torch.exp(a[h] * after) * (bb[n, : i + 1, h] @ c[n, i, h]) * steps
    return m.out_proj(y.reshape(b, t, d)), weights


CASES = [  # (heads, T, options): the quadratic form, one chunk exactly, past it, several chunks, tiny chunks
    (2, 5, {}),
    (1, 64, {}),
    (4, 65, {}),
    (2, 150, {}),
    (2, 23, dict(chunk=4)),
    (2, 9, dict(short_conv=0)),
    (1, 12, dict(short_conv=2, chunk=5)),
]


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize(("heads", "t", "options"), CASES, ids=[f"h{h}-t{t}-{o}" for h, t, o in CASES])
def test_fast_path_weights_path_and_float64_recurrence_agree(heads, t, options, padded):
    torch.manual_seed(t)
    module = build_attention("mamba2", d_in=8, d_out=8, num_heads=heads, causal=True, qkv_bias=True, **options)
    module64 = copy.deepcopy(module).double()
    x = torch.randn(2, t, 8)
    padding = (torch.arange(t)[None, :] < torch.tensor([[0], [min(3, t - 1)]])) if padded else None  # left padding
    fast, none = module(x, key_padding_mask=padding)
    slow, weights = module(x, key_padding_mask=padding, need_weights=True)
    with torch.no_grad():
        expected, expected_weights = reference_mamba2(module64, x.double(), padding)
    assert none is None and weights.shape == (2, heads, t, t)
    assert_close(weights, expected_weights)
    assert_close(slow, expected)
    assert_close(fast, expected, atol=2e-5)
    assert (weights.triu(1) == 0).all()  # nothing read from a later position
    if padded:
        assert (weights[1, :, :, : min(3, t - 1)] == 0).all()  # nor from a hidden one


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
