"""Attention sinks: an extra key that every query may attend to, whose value is zero.

``multihead``'s option ``sink``: ``zero`` is "softmax off by one" (Miller 2023): the softmax gets one more logit,
0, so a query can give less than all of its attention to the real keys, softmax₁(s)_j = exp(s_j) / (1 + Σ_k exp(s_k)).
``learned`` makes that logit a learned number per head, b_h: exp(s_j) / (exp(b_h) + Σ_k exp(s_k)) (the sink logits of
gpt-oss, Xiao et al. 2023's sink token without a token). The sink's value is zero, so it adds nothing to the output:
the mass it takes is what is missing from each row of the T × T map (rows sum to less than 1).

The fused path adds the sink as one more key of value zero. Under a causal mask alone it keeps the causal
kernel (``is_causal``, no T × T mask): the sink is key 0, before a dummy query 0 (dropped), and its logit comes
through one more dimension, 1 in every query and b_h·√d in the sink's key (0 in the others), at the scale 1/√d
of the real dimensions. Otherwise the sink is key T_k with a zero key, its logit b_h in the additive mask. The explicit path forms the T × T scores,
normalises them with the log-sum-exp that includes the sink's logit, and computes the output through the hook
points; a query whose keys are all hidden gives all of its attention to the sink (a zero output, never NaN).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from attention_lab.attention.functional import AttentionOutput
from attention_lab.attention.masks import allowed_keys


def causal_sink_attention(q: Tensor, k: Tensor, v: Tensor, sink: Tensor, dropout_p: float) -> Tensor:
    """The causal sink attention through the causal kernel: q (B, H, T, d), k and v (B, H_kv, T, .), sink (1, H, 1, 1)."""
    b, h, t, d = q.shape
    groups = h // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)  # a sink logit per query head
    queries = F.pad(F.pad(q, (0, 1), value=1.0), (0, 0, 1, 0))  # (B, H, 1 + T, d + 1): dummy query 0, last dim 1
    sink_key = torch.cat([q.new_zeros(b, h, 1, d), (sink * math.sqrt(d)).expand(b, h, 1, 1)], dim=-1)  # (B, H, 1, d + 1)
    keys = torch.cat([sink_key, F.pad(k, (0, 1))], dim=2)  # (B, H, 1 + T, d + 1)
    # (B, H, 1 + T, d_v + 1): the sink's value is zero; the zero last column makes every width d + 1 when d_v = d,
    # which the flash kernels need (with widths that differ, SDPA falls back to its T x T math path).
    width = keys.shape[-1] - v.shape[-1]
    values = F.pad(v, (0, max(width, 0), 1, 0))
    context = F.scaled_dot_product_attention(queries, keys, values, dropout_p=dropout_p, is_causal=True,
                                             scale=1.0 / math.sqrt(d))
    return context[:, :, 1:, :v.shape[-1]]  # (B, H, T, d_v), without the dummy query and the padding


def sink_attend(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    sink_logit: Tensor,
    *,
    causal: bool = False,
    mask: Tensor | None = None,
    window: int | None = None,
    bias: Tensor | None = None,
    need_weights: bool = False,
    dropout_p: float = 0.0,
    on_scores: Callable[[Tensor], Tensor] | None = None,
    on_weights: Callable[[Tensor], Tensor] | None = None,
) -> AttentionOutput:
    """softmax over the keys and one sink of logit ``sink_logit`` (H,) and value 0, then · v.

    q: (B, H, T_q, d), k: (B, H_kv, T_k, d), v: (B, H_kv, T_k, d_v); mask (True = may attend), window and bias as
    in :func:`attention_lab.attention.functional.attend`. The weights returned are (B, H, T_q, T_k), without the
    sink's column.
    """
    b, h, t_q, _ = q.shape
    t_k = k.shape[-2]
    groups = h // k.shape[-3]  # grouped-query attention: query head h reads kv head h // groups
    allowed = allowed_keys(t_q, t_k, causal=causal, window=window, mask=mask, device=q.device)
    sink = sink_logit.to(q.dtype).view(1, h, 1, 1)  # (1, H, 1, 1)
    explicit = need_weights or on_scores is not None or on_weights is not None
    if not explicit and causal and mask is None and window is None and bias is None:
        return AttentionOutput(causal_sink_attention(q, k, v, sink, dropout_p), None)
    if not explicit:
        # One more key: zero key, zero value, its logit through the additive mask (B or 1, H, T_q, T_k + 1).
        logits = q.new_zeros((1, h, t_q, t_k)) if bias is None else bias.expand(1, h, t_q, t_k).to(q.dtype)
        if allowed is not None:
            logits = logits.masked_fill(~allowed, float("-inf"))
        logits = torch.cat([logits, sink.expand(logits.shape[0], h, t_q, 1)], dim=-1)
        k = torch.cat([k, k.new_zeros(b, k.shape[1], 1, k.shape[-1])], dim=-2)  # (B, H_kv, T_k + 1, d)
        v = torch.cat([v, v.new_zeros(b, v.shape[1], 1, v.shape[-1])], dim=-2)  # (B, H_kv, T_k + 1, d_v)
        context = F.scaled_dot_product_attention(q, k, v, attn_mask=logits, dropout_p=dropout_p,
                                                 enable_gqa=groups > 1)
        return AttentionOutput(context, None)
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)  # (B, H, T_k, .)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (B, H, T_q, T_k)
    if bias is not None:
        scores = scores + bias
    if allowed is not None:
        scores = scores.masked_fill(~allowed, float("-inf"))
    if on_scores is not None:
        scores = on_scores(scores)
    # log(exp(b_h) + Σ_k exp(s_k)): the sink's logit is one more term of the normaliser.
    normaliser = torch.logsumexp(torch.cat([scores, sink.expand(*scores.shape[:-1], 1)], dim=-1), dim=-1, keepdim=True)
    weights = torch.exp(scores - normaliser)  # rows sum to 1 - (the sink's share)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p)
    if on_weights is not None:
        weights = on_weights(weights)
    return AttentionOutput(weights @ v, weights if need_weights else None)
