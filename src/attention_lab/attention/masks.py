"""Boolean attention masks (True = this query may attend to this key), and how they combine."""

from __future__ import annotations

import torch
from torch import Tensor


def causal_mask(t_q: int, t_k: int, device: torch.device | None = None) -> Tensor:
    """Boolean (T_q, T_k) mask, True where query i may attend to key j <= i."""
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril()


def window_mask(t_q: int, t_k: int, window: int, *, causal: bool = False, device: torch.device | None = None) -> Tensor:
    """Boolean (T_q, T_k) sliding-window mask: |i - j| < window, or 0 <= i - j < window when causal."""
    offset = torch.arange(t_q, device=device)[:, None] - torch.arange(t_k, device=device)[None, :]  # i - j
    if causal:
        return (offset >= 0) & (offset < window)
    return offset.abs() < window


def padding_to_attn_mask(key_padding_mask: Tensor | None) -> Tensor | None:
    """(B, T_k) key padding mask (True = padding) -> (B, 1, 1, T_k) attn mask (True = attend)."""
    if key_padding_mask is None:
        return None
    return ~key_padding_mask[:, None, None, :]


def allowed_keys(
    t_q: int,
    t_k: int,
    *,
    causal: bool = False,
    window: int | None = None,
    mask: Tensor | None = None,
    device: torch.device | None = None,
) -> Tensor | None:
    """Everything a query may attend to, as one boolean mask; None when it may attend to every key.

    ``mask`` is broadcastable to (..., T_q, T_k); the result broadcasts the same way.
    """
    if window is not None:
        structure = window_mask(t_q, t_k, window, causal=causal, device=device)
    elif causal:
        structure = causal_mask(t_q, t_k, device)
    else:
        return mask
    return structure if mask is None else mask & structure
