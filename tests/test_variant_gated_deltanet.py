"""gated_deltanet against a float64 recurrence written here from the paper (Yang et al. 2025, eq. 10):

    S_t = S_{t-1} (α_t (I − β_t k_t k_tᵀ)) + β_t v_t k_tᵀ,    o_t = S_t q_t,

q and k L2-normalised (q also scaled by 1/√d, as fla's layer), step by step from the module's parameters only.
Its implied map comes from the same loop: the output is linear in the values, so column j of M is the output
for v = e_j (the value 1 at position j, 0 elsewhere). The fast path (the parallel form up to ``chunk``
positions, the chunked WY form beyond), the weights path and the reference agree.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F

from attention_lab.attention import build_attention
from attention_lab.attention.gated_deltanet import delta_chunked, delta_map, gated_delta_recurrent
from test_attention_reference import assert_close
from test_variant_mamba2 import short_conv_reference

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def delta_rule(q, k, v, alpha, beta):
    """One head, one sequence: q, k (T, d), v (T, d_v), α, β (T,) -> o (T, d_v), by the paper's recurrence."""
    t, d = k.shape
    state = torch.zeros(v.shape[1], d, dtype=v.dtype)  # S: (d_v, d)
    eye = torch.eye(d, dtype=v.dtype)
    out = []
    for i in range(t):
        state = state @ (alpha[i] * (eye - beta[i] * torch.outer(k[i], k[i]))) + beta[i] * torch.outer(v[i], k[i])
        out.append(state @ q[i])
    return torch.stack(out)


def reference_gated_deltanet(m, x, padding):
    """(context (B, T, D), map (B, H, T, T)) in float64 loops."""
    b, t, d = x.shape
    heads, p = m.num_heads, d // m.num_heads
    keep = torch.ones(b, t, 1, dtype=x.dtype) if padding is None else (~padding)[..., None].to(x.dtype)
    q, k, v = (z.view(b, t, heads, p) for z in short_conv_reference(m, x, keep).split(d, dim=-1))
    q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-6) / math.sqrt(p)
    k = k / k.norm(dim=-1, keepdim=True).clamp_min(1e-6)
    alpha = torch.exp(-torch.exp(m.A_log) * F.softplus(m.W_alpha(x)))  # (B, T, H) in (0, 1)
    beta = torch.sigmoid(m.W_beta(x))
    alpha = torch.where(keep.bool(), alpha, torch.ones_like(alpha))  # a hidden position keeps the state ...
    beta = beta * keep  # ... and writes nothing
    y = torch.zeros(b, t, heads, p, dtype=x.dtype)
    weights = torch.zeros(b, heads, t, t, dtype=x.dtype)
    for n in range(b):
        for h in range(heads):
            args = q[n, :, h], k[n, :, h]
            y[n, :, h] = delta_rule(*args, v[n, :, h], alpha[n, :, h], beta[n, :, h])
            unit = torch.eye(t, dtype=x.dtype)  # the values e_j, one column per position
            weights[n, h] = delta_rule(*args, unit, alpha[n, :, h], beta[n, :, h])
    return m.out_proj(y.reshape(b, t, d)), weights


CASES = [  # (heads, T, options): the parallel form, one chunk exactly, past it, several chunks, tiny chunks
    (2, 5, {}),
    (1, 64, {}),
    (4, 65, {}),
    (2, 150, {}),
    (2, 23, dict(chunk=4)),
    (2, 9, dict(short_conv=0)),
    (1, 12, dict(short_conv=3, chunk=5)),
]


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize(("heads", "t", "options"), CASES, ids=[f"h{h}-t{t}-{o}" for h, t, o in CASES])
def test_fast_path_weights_path_and_float64_recurrence_agree(heads, t, options, padded):
    torch.manual_seed(t)
    module = build_attention("gated_deltanet", d_in=8, d_out=8, num_heads=heads, causal=True, qkv_bias=True,
                             **options)
    module64 = copy.deepcopy(module).double()
    x = torch.randn(2, t, 8)
    padding = (torch.arange(t)[None, :] < torch.tensor([[0], [min(3, t - 1)]])) if padded else None  # left padding
    fast, none = module(x, key_padding_mask=padding)
    slow, weights = module(x, key_padding_mask=padding, need_weights=True)
    with torch.no_grad():
        expected, expected_weights = reference_gated_deltanet(module64, x.double(), padding)
    assert none is None and weights.shape == (2, heads, t, t)
    assert_close(weights, expected_weights)
    assert_close(slow, expected)
    assert_close(fast, expected, atol=2e-5)
    assert (weights.triu(1) == 0).all()  # nothing read from a later position
    if padded:
        assert (weights[1, :, :, : min(3, t - 1)] == 0).all()  # nor from a hidden one


def random_inputs(t: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    b, h, d, d_v = 2, 3, 4, 5
    q, k = (F.normalize(torch.randn(b, h, t, d, generator=g, dtype=torch.float64), dim=-1) for _ in range(2))
    v = torch.randn(b, h, t, d_v, generator=g, dtype=torch.float64)
    log_alpha = -torch.rand(b, h, t, generator=g, dtype=torch.float64)
    beta = torch.rand(b, h, t, generator=g, dtype=torch.float64)
    return q, k, v, log_alpha, beta


@pytest.mark.parametrize("t", [1, 7, 16, 33, 100])
@pytest.mark.parametrize("chunk", [1, 4, 16, 64])
def test_chunked_form_recurrent_form_and_map_agree(t, chunk):
    q, k, v, log_alpha, beta = random_inputs(t, t * 100 + chunk)
    recurrent = gated_delta_recurrent(q, k, v, log_alpha, beta)
    assert_close(delta_chunked(q, k, v, log_alpha, beta, chunk), recurrent, atol=1e-12, rtol=1e-10)
    assert_close(delta_map(q, k, log_alpha, beta) @ v, recurrent, atol=1e-12, rtol=1e-10)


def test_the_module_recurrence_is_the_papers():
    """gated_delta_recurrent (the module's step-by-step form) against the paper's update, written out above."""
    q, k, v, log_alpha, beta = random_inputs(9, 0)
    expected = torch.stack([torch.stack([delta_rule(q[n, h], k[n, h], v[n, h], log_alpha[n, h].exp(), beta[n, h])
                                         for h in range(3)]) for n in range(2)])
    assert_close(gated_delta_recurrent(q, k, v, log_alpha, beta), expected, atol=1e-12)


def test_a_full_write_replaces_what_the_key_held():
    """The delta rule: with α = 1 and β = 1, writing v under a unit key k makes S k = v exactly, whatever S held
    under k before (plain linear attention would add to it)."""
    k = F.normalize(torch.tensor([[1.0, 2.0, 0.5]], dtype=torch.float64), dim=-1)
    keys = k.expand(3, 3)[None, None]  # the same key three times
    values = torch.tensor([[1.0, 0.0], [0.0, 1.0], [3.0, -2.0]], dtype=torch.float64)[None, None]
    ones = torch.ones(1, 1, 3, dtype=torch.float64)
    out = gated_delta_recurrent(keys, keys, values, 0 * ones, ones)  # query = the key: read what it holds
    assert_close(out[0, 0], values[0, 0], atol=1e-12)


def test_the_map_is_signed():
    """The delta rule subtracts what a key already held: the implied map has negative entries (unlike softmax)."""
    q, k, v, log_alpha, beta = random_inputs(12, 3)
    weights = delta_map(q, k, log_alpha, beta.clamp_min(0.5))
    assert (weights < -1e-3).any() and (weights.triu(1) == 0).all()
