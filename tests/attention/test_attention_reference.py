"""float64 references for the attention tests, written without the library, and checks of the references.

* ``reference_attention``: plain softmax(q·kᵀ·scale + bias) · v with -inf masking
* ``reference_rope``: rotary embeddings as complex multiplication
* ``paper_alibi_slopes`` / ``reference_alibi``: the ALiBi paper's slopes and distance bias
* ``band`` / ``tril``: sliding-window and causal masks, entry by entry
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

ATOL, RTOL = 1e-5, 1.3e-6


def assert_close(actual: Tensor, expected: Tensor, atol: float = ATOL, rtol: float = RTOL) -> None:
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    actual, expected = actual.detach().double(), expected.detach().double()
    assert not actual.isnan().any(), "NaN in the result"
    bad = (actual - expected).abs() > atol + rtol * expected.abs()
    assert not bad.any(), f"max |Δ| = {(actual - expected).abs().max().item():.3g} at {bad.nonzero()[0].tolist()}"


def reference_attention(q: Tensor, k: Tensor, v: Tensor, allowed: Tensor | None, scale: float,
                        bias: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """float64 softmax(q·kᵀ·scale + bias) · v; a query with no allowed key gets zero weights."""
    q, k, v = q.double(), k.double(), v.double()
    scores = torch.einsum("...qd,...kd->...qk", q, k) * scale
    if bias is not None:
        scores = scores + bias.double()
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    weights = torch.nan_to_num(torch.softmax(scores, dim=-1), nan=0.0)  # all -inf rows: NaN -> 0
    return torch.einsum("...qk,...kd->...qd", weights, v), weights


def tril(t_q: int, t_k: int) -> Tensor:
    return torch.arange(t_k)[None, :] <= torch.arange(t_q)[:, None]


def band(t_q: int, t_k: int, window: int, causal: bool) -> Tensor:
    """Sliding window, entry by entry: |i - j| < window, or 0 <= i - j < window when causal."""
    return torch.tensor([[(0 <= i - j < window) if causal else abs(i - j) < window for j in range(t_k)]
                         for i in range(t_q)])


def paper_alibi_slopes(n: int) -> list[float]:
    """The ALiBi paper's reference implementation (Press et al., ofirpress/attention_with_linear_biases)."""
    def get_slopes_power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        ratio = start
        return [start * ratio**i for i in range(n)]

    if math.log2(n).is_integer():
        return get_slopes_power_of_2(n)
    closest_power_of_2 = 2 ** math.floor(math.log2(n))
    return get_slopes_power_of_2(closest_power_of_2) + paper_alibi_slopes(2 * closest_power_of_2)[0::2][
        : n - closest_power_of_2]


def reference_alibi(num_heads: int, t_q: int, t_k: int, causal: bool) -> Tensor:
    """(H, T_q, T_k) float64: -m_h (i - j) when causal, -m_h |i - j| otherwise."""
    slopes = torch.tensor(paper_alibi_slopes(num_heads), dtype=torch.float64)
    offset = (torch.arange(t_q)[:, None] - torch.arange(t_k)[None, :]).double()  # i - j
    return -slopes[:, None, None] * (offset if causal else offset.abs())


def reference_rope(x: Tensor, base: float = 10000.0) -> Tensor:
    """Rotate-half RoPE as complex multiplication: (x_i + i·x_{i+d/2}) · e^{i·t·base^(-2i/d)} at position t."""
    t, d = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)  # (d/2,)
    rotation = torch.polar(torch.ones(t, d // 2, dtype=torch.float64), torch.arange(t).double()[:, None] * theta)
    z = torch.complex(x[..., : d // 2].double(), x[..., d // 2:].double()) * rotation
    return torch.cat([z.real, z.imag], dim=-1)


# ---------------------------------------------------------------------------------------------
# the references against things known by heart
# ---------------------------------------------------------------------------------------------


def test_reference_rope_rotates_each_pair_by_its_angle():
    # Pair (x_i, x_{i+d/2}) at position t turns by t·base^(-2i/d): the 2 x 2 rotation matrix, by hand.
    d, t = 4, 3
    x = torch.randn(t, d, dtype=torch.float64)
    expected = torch.empty_like(x)
    for pos in range(t):
        for i in range(d // 2):
            angle = pos * 10000.0 ** (-2 * i / d)
            c, s = math.cos(angle), math.sin(angle)
            a, b = x[pos, i].item(), x[pos, i + d // 2].item()
            expected[pos, i], expected[pos, i + d // 2] = c * a - s * b, s * a + c * b
    assert_close(reference_rope(x), expected)


def test_paper_slopes_known_values():
    assert paper_alibi_slopes(8) == [2.0**-e for e in range(1, 9)]
    assert paper_alibi_slopes(6) == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]


def test_reference_alibi_and_band():
    bias = reference_alibi(2, 3, 3, causal=False)
    assert torch.equal(bias[0], -0.0625 * torch.tensor([[0.0, 1, 2], [1, 0, 1], [2, 1, 0]]))
    assert torch.equal(band(3, 3, 2, causal=True), torch.tensor([[1, 0, 0], [1, 1, 0], [0, 1, 1]]).bool())
    assert torch.equal(band(3, 3, 2, causal=False), torch.tensor([[1, 1, 0], [1, 1, 1], [0, 1, 1]]).bool())
