"""Sigmoid attention (Ramapuram et al. 2024, "Theory, Analysis, and Best Practices for Sigmoid Self-Attention"):
weights = sigmoid(q·kᵀ/√d + b), each in (0, 1) on its own, with no row normalisation; b = -log(T_k) by default
(T_k: the sequence's keys, padding not counted), so that a row's weights start out summing to about 1. Masks, windows, rope and alibi as for softmax attention:
a hidden key gets weight 0. Heads and ``kv_heads`` as in ``multihead``.

Left out of the paper: FlashSigmoid, its fused kernel (here the scores are formed by PyTorch, in place on the fast
path: the same weights, more memory); hybrid-norm (an extra normalisation of the attention output) or LayerScale,
which it adds to keep large-scale training stable (the lab's block is the same for every variant). Where the
paper's n is the sequence length, T_k here leaves out a sequence's padding; under a causal mask it stays the whole
sequence's number of keys, as in the paper, not the number a query can see.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from attention_lab.attention.alibi import alibi_bias
from attention_lab.attention.arguments import check_split_heads
from attention_lab.attention.errors import AttentionArgumentError
from attention_lab.attention.functional import AttentionOutput
from attention_lab.attention.masks import allowed_keys
from attention_lab.attention.multihead import MultiHeadAttention
from attention_lab.attention.registry import register


@register("sigmoid")
class SigmoidAttention(MultiHeadAttention):
    """``multihead``'s projections (W_query, W_key, W_value, out_proj); sigmoid in place of the softmax.

    ``score_bias`` is b; None takes the paper's -log(T_k), T_k the number of keys.
    """

    origin = "Ramapuram et al. 2024, *Sigmoid Self-Attention*"
    summary = "sigmoid(q·kᵀ/√d + b) per key, no normalisation over the row"

    takes_source = False
    multi_head = True
    grouped_kv = True
    projects = True
    kind = "sigmoid"
    options = ("score_bias",)

    def __init__(self, d_in: int, d_out: int, *, score_bias: float | None = None, **common) -> None:
        if score_bias is not None and (isinstance(score_bias, bool) or not isinstance(score_bias, (int, float))
                                       or not math.isfinite(score_bias)):
            raise AttentionArgumentError("score_bias", score_bias, "a finite number, or None for -log(T_k)")
        check_split_heads("sigmoid", d_out, common.get("num_heads", 1), common.get("d_v"))
        super().__init__(d_in, d_out, **common)
        self.score_bias = score_bias

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool) -> AttentionOutput:
        # q: (B, H, T_q, d), k: (B, H_kv, T_k, d), v: (B, H_kv, T_k, d_v)
        t_q, t_k = q.shape[-2], k.shape[-2]
        groups = q.shape[1] // k.shape[1]  # grouped-query attention: query head h reads kv head h // groups
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        if self.score_bias is not None:
            bias = float(self.score_bias)
        elif mask is None:
            bias = -math.log(t_k)
        else:  # T_k counts the sequence's real keys: padding must not change the bias of the words it follows
            bias = -mask.sum(dim=-1, keepdim=True).clamp_min(1).to(q.dtype).log()  # (B, 1, 1 or T_q, 1)
        allowed = allowed_keys(t_q, t_k, causal=self.causal, window=self.window, mask=mask, device=q.device)
        scores = q @ k.transpose(-2, -1)  # (B, H, T_q, T_k)
        if need_weights or self.weights_hooked:  # step by step, each step its own tensor
            scores = scores / math.sqrt(q.shape[-1]) + bias
            if self.position == "alibi":
                scores = scores + alibi_bias(q.shape[1], t_q, t_k, device=q.device, dtype=q.dtype)
            if allowed is not None:
                scores = scores.masked_fill(~allowed, float("-inf"))  # sigmoid(-inf) = 0, as on the fast path
            weights = self.hook_weights(torch.sigmoid(self.hook_scores(scores)))
        else:  # in place on the fresh scores: fewer T x T copies (sigmoid's backward needs only its output)
            scores = scores.mul_(1.0 / math.sqrt(q.shape[-1])).add_(bias)
            if self.position == "alibi":
                scores = scores + alibi_bias(q.shape[1], t_q, t_k, device=q.device, dtype=q.dtype)
            if allowed is not None:
                scores = scores.masked_fill(~allowed, float("-inf"))  # sigmoid(-inf) = 0
            weights = scores.sigmoid_()
        if self.training and self.dropout > 0.0:
            weights = F.dropout(weights, p=self.dropout)
        return AttentionOutput(weights @ v, weights if need_weights else None)
