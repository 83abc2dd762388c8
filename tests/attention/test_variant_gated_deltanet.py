"""gated_deltanet's own: its chunked WY form, its step-by-step form and its map agree, that step-by-step form is the
paper's recurrence (Yang et al. 2025, eq. 10, written out in attention_lab.attention.references.delta_rule), the
delta rule replaces what a key held, and the map is signed. Its fast path, weights path and float64 recurrence
(references.gated_deltanet_reference) agree, and causality, hooks, refusals, gradients and training:
test_variant_recurrences.py.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_attention_reference import assert_close

from attention_lab.attention.gated_deltanet import delta_chunked, delta_map, gated_delta_recurrent
from attention_lab.attention.references import delta_rule

pytestmark = pytest.mark.usefixtures("one_torch_thread")


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
