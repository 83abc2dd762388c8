"""The functional core shared by every attention module.

Mask conventions (the same as the PyTorch arguments of the same name):

* ``attend(mask=...)`` is like ``F.scaled_dot_product_attention``'s boolean ``attn_mask``:
  ``True`` means "this query may attend to this key".
* ``key_padding_mask`` (taken by the modules) is like ``nn.MultiheadAttention``'s:
  ``True`` means "this key is padding: ignore it".

Masked scores are set to ``-inf`` (``-1e9`` would overflow in fp16). A query whose keys are all
masked gets all-zero weights and a zero context, never NaN.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor


class AttentionOutput(NamedTuple):
    context: Tensor  # (..., T_q, d_v): the context vectors
    weights: Tensor | None  # (..., T_q, T_k) when requested, else None


def causal_mask(t_q: int, t_k: int, device: torch.device | None = None) -> Tensor:
    """Boolean (T_q, T_k) mask, True where query i may attend to key j <= i."""
    return torch.ones(t_q, t_k, dtype=torch.bool, device=device).tril()


def padding_to_attn_mask(key_padding_mask: Tensor | None) -> Tensor | None:
    """(B, T_k) key padding mask (True = padding) -> (B, 1, 1, T_k) attn mask (True = attend)."""
    if key_padding_mask is None:
        return None
    return ~key_padding_mask[:, None, None, :]


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool = False,
    mask: Tensor | None = None,
    scale: float | None = None,
    need_weights: bool = True,
    dropout_p: float = 0.0,
) -> AttentionOutput:
    """Scaled dot-product attention: softmax(q·kᵀ·scale, masked) · v.

    q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v).
    mask: boolean, broadcastable to (..., T_q, T_k), True = may attend.
    scale: defaults to 1/sqrt(d_k).
    need_weights=False takes PyTorch's fused kernel (no T_q x T_k matrix is kept);
    need_weights=True computes the weights explicitly and returns them.
    dropout_p is applied to the weights as given: callers pass 0.0 outside training.
    """
    t_q, t_k = q.shape[-2], k.shape[-2]
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError(f"mask must be a boolean tensor (True = may attend), got {mask.dtype}")
    if causal and mask is not None:
        mask = mask & causal_mask(t_q, t_k, q.device)
        causal = False

    if not need_weights:
        context = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, dropout_p=dropout_p, is_causal=causal, scale=scale
        )
        return AttentionOutput(context, None)

    rows_may_be_empty = mask is not None  # a causal mask alone always shows key 0
    if causal:
        mask = causal_mask(t_q, t_k, q.device)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    # In place on the fresh (..., T_q, T_k) scores, the same numbers with two fewer T x T copies:
    # the matmul's backward needs q and k, not its output, and masked_fill's needs only the mask.
    scores = (q @ k.transpose(-2, -1)).mul_(scale)
    if mask is not None:
        scores.masked_fill_(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    if rows_may_be_empty:
        # softmax over an all -inf row is NaN: such a query attends to nothing.
        weights = weights.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    return AttentionOutput(weights @ v, weights)
