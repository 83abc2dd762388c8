"""Rotary position embeddings (Su et al. 2021, "RoFormer"), in the rotate-half convention.

The rotate-half convention (GPT-NeoX, Hugging Face LLaMA) pairs feature i with feature i + d/2 and
rotates each pair by the angle position · base^(-2i/d). Queries and keys are rotated per head after
the projection, so their dot product depends only on the distance between the two positions.
"""

from __future__ import annotations

import torch
from torch import Tensor

ROPE_BASE = 10000.0


def rotate_half(x: Tensor) -> Tensor:
    """(x1, x2) -> (-x2, x1), the two halves of the last dimension."""
    first, second = x.chunk(2, dim=-1)
    return torch.cat((-second, first), dim=-1)


def rope_angles(t: int, head_dim: int, *, base: float = ROPE_BASE, device=None, dtype=torch.float32) -> Tensor:
    """(T, head_dim) rotation angles for positions 0..T-1, the d/2 frequencies written twice."""
    inv_freq = 1.0 / base ** (torch.arange(0, head_dim, 2, device=device, dtype=dtype) / head_dim)
    angles = torch.outer(torch.arange(t, device=device, dtype=dtype), inv_freq)  # (T, d/2)
    return torch.cat((angles, angles), dim=-1)


def apply_rope(q: Tensor, k: Tensor, *, base: float = ROPE_BASE) -> tuple[Tensor, Tensor]:
    """Rotate queries (..., T_q, d) and keys (..., T_k, d); query/key i sits at position i."""
    # Angles in at least float32: half precision would blur the positions of a long sequence.
    dtype = torch.promote_types(q.dtype, torch.float32)
    angles = rope_angles(max(q.shape[-2], k.shape[-2]), q.shape[-1], base=base, device=q.device, dtype=dtype)
    cos, sin = angles.cos().to(q.dtype), angles.sin().to(q.dtype)

    def rotate(x: Tensor) -> Tensor:
        t = x.shape[-2]
        return x * cos[:t] + rotate_half(x) * sin[:t]

    return rotate(q), rotate(k)
