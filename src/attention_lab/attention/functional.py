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
from collections.abc import Callable
from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor

from attention_lab.attention.masks import allowed_keys


class AttentionOutput(NamedTuple):
    context: Tensor  # (..., T_q, d_v): the context vectors
    weights: Tensor | None  # (..., T_q, T_k) when requested, else None


def attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    causal: bool = False,
    mask: Tensor | None = None,
    window: int | None = None,
    bias: Tensor | None = None,
    scale: float | None = None,
    need_weights: bool = True,
    dropout_p: float = 0.0,
    enable_gqa: bool = False,
    on_scores: Callable[[Tensor], Tensor] | None = None,
    on_weights: Callable[[Tensor], Tensor] | None = None,
) -> AttentionOutput:
    """Scaled dot-product attention: softmax(q·kᵀ·scale + bias, masked) · v.

    q: (..., T_q, d_k), k: (..., T_k, d_k), v: (..., T_k, d_v).
    mask: boolean, broadcastable to (..., T_q, T_k), True = may attend.
    window: query i sees key j only if |i - j| < window (0 <= i - j < window when causal).
    bias: float, broadcastable to (..., T_q, T_k), added to the scaled scores (ALiBi).
    scale: defaults to 1/sqrt(d_k).
    enable_gqa: k and v have fewer heads (dim -3) than q; query head h reads kv head
    h // (H_q / H_kv), the grouping of ``F.scaled_dot_product_attention(enable_gqa=True)``.
    need_weights=False takes PyTorch's fused kernel (no T_q x T_k matrix is kept);
    need_weights=True computes the weights explicitly and returns them.
    on_scores / on_weights see (and may replace) the masked pre-softmax scores and the weights, (..., H, T_q, T_k):
    the hook points of :mod:`attention_lab.attention.hooks`. Either one takes the explicit path.
    dropout_p is applied to the weights as given: callers pass 0.0 outside training.
    """
    t_q, t_k = q.shape[-2], k.shape[-2]
    if mask is not None and mask.dtype != torch.bool:
        raise ValueError(f"mask must be a boolean tensor (True = may attend), got {mask.dtype}")
    if enable_gqa and q.shape[-3] % k.shape[-3]:
        raise ValueError(f"enable_gqa needs query heads ({q.shape[-3]}) to be a multiple of kv heads ({k.shape[-3]})")
    # A causal mask alone always shows key 0 and goes to the fused kernel as is_causal.
    only_causal = causal and mask is None and window is None
    rows_may_be_empty = mask is not None or window is not None

    explicit = need_weights or on_scores is not None or on_weights is not None
    if not explicit and q.shape[-1] != v.shape[-1]:
        # PyTorch's fused kernels want one width for q, k and v; otherwise it falls back to forming the T_q x T_k
        # matrix. Zero features change no dot product and no weighted sum: pad the narrower side, keep the scale.
        d_k, d_v = q.shape[-1], v.shape[-1]
        scale = 1.0 / math.sqrt(d_k) if scale is None else scale
        if d_k < d_v:
            q, k = F.pad(q, (0, d_v - d_k)), F.pad(k, (0, d_v - d_k))
        context, _ = attend(q, k, F.pad(v, (0, max(d_k - d_v, 0))), causal=causal, mask=mask, window=window,
                            bias=bias, scale=scale, need_weights=False, dropout_p=dropout_p, enable_gqa=enable_gqa)
        return AttentionOutput(context[..., :d_v], None)
    if not explicit:
        if only_causal and bias is None:
            return AttentionOutput(F.scaled_dot_product_attention(
                q, k, v, dropout_p=dropout_p, is_causal=True, scale=scale, enable_gqa=enable_gqa), None)
        attn_mask = allowed_keys(t_q, t_k, causal=causal, window=window, mask=mask, device=q.device)
        if bias is not None:  # one additive float mask: the bias where allowed, -inf elsewhere
            attn_mask = bias if attn_mask is None else bias.masked_fill(~attn_mask, float("-inf"))
        context = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=dropout_p, scale=scale, enable_gqa=enable_gqa)
        return AttentionOutput(context, None)

    allowed = allowed_keys(t_q, t_k, causal=causal, window=window, mask=mask, device=q.device)
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    if enable_gqa:
        # (..., H, T, d) -> (..., H_kv, H / H_kv, T, d): each kv head meets its group, without copying k or v.
        kv_heads = k.shape[-3]
        q = q.unflatten(-3, (kv_heads, q.shape[-3] // kv_heads))
        k, v = k.unsqueeze(-3), v.unsqueeze(-3)
    # In place on the fresh (..., T_q, T_k) scores, the same numbers with fewer T x T copies:
    # the matmul's backward needs q and k, not its output, and masked_fill's needs only the mask.
    scores = (q @ k.transpose(-2, -1)).mul_(scale)
    if enable_gqa:
        scores = scores.flatten(-4, -3)  # (..., H, T_q, T_k)
    if bias is not None:
        fits = torch.broadcast_shapes(scores.shape, bias.shape) == scores.shape
        scores = scores.add_(bias) if fits else scores + bias
    if allowed is not None:
        scores.masked_fill_(~allowed, float("-inf"))
    if on_scores is not None:
        scores = on_scores(scores)
    weights = torch.softmax(scores, dim=-1)
    if rows_may_be_empty:
        # softmax over an all -inf row is NaN: such a query attends to nothing.
        weights = weights.masked_fill(~allowed.any(dim=-1, keepdim=True), 0.0)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    if on_weights is not None:
        weights = on_weights(weights)
    if enable_gqa:
        context = (weights.unflatten(-3, (k.shape[-4], -1)) @ v).flatten(-4, -3)
    else:
        context = weights @ v
    return AttentionOutput(context, weights if need_weights else None)
