"""Attention with linear biases (Press et al. 2022, "Train Short, Test Long"): a per-head distance penalty.

Head h adds -m_h · |i - j| to its scores, so far-away keys count less; no position enters the
embeddings. The slopes m_h are those of the paper's reference implementation.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor


def alibi_slopes(num_heads: int) -> list[float]:
    """Geometric slopes starting at 2^(-8/H) with ratio 2^(-8/H), when H is a power of two.

    Otherwise the paper's rule: the slopes of the closest smaller power of two, then every other slope
    of twice that power, as many as are missing.
    """
    if num_heads & (num_heads - 1) == 0:  # a power of two
        start = 2.0 ** (-8.0 / num_heads)
        return [start ** (h + 1) for h in range(num_heads)]
    closest = 2 ** math.floor(math.log2(num_heads))
    return alibi_slopes(closest) + alibi_slopes(2 * closest)[0::2][: num_heads - closest]


def alibi_bias(num_heads: int, t_q: int, t_k: int, *, device=None, dtype=torch.float32) -> Tensor:
    """(H, T_q, T_k) additive score bias -m_h · |i - j|.

    With a causal mask only j <= i is seen, where this is the paper's -m_h · (i - j).
    """
    slopes = torch.tensor(alibi_slopes(num_heads), device=device, dtype=dtype)
    distance = (torch.arange(t_q, device=device)[:, None] - torch.arange(t_k, device=device)[None, :]).abs()
    return distance.to(dtype) * -slopes[:, None, None]
