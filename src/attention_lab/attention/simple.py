"""Self-attention without trainable weights (ch. 3 §3.3.1 of "Build an LLM from scratch")."""

from __future__ import annotations

import torch
from torch import Tensor

from attention_lab.attention.base import AttentionModule, require_single_head
from attention_lab.attention.functional import AttentionOutput, attend, causal_mask
from attention_lab.attention.registry import register

NORMALIZATIONS = ("softmax", "sum")


@register("simple")
class SimpleAttention(AttentionModule):
    """scores = x·xᵀ (unscaled, as in the notebook), weights = softmax(scores), context = weights·x.

    ``normalize="sum"`` divides the scores by their row sum instead: the naive normalisation the
    notebook shows before explaining why softmax is better.
    """

    def __init__(self, d_in: int, d_out: int, *, num_heads: int = 1, d_v: int | None = None,
                 qkv_bias: bool = False, dropout: float = 0.0, causal: bool = False,
                 normalize: str = "softmax") -> None:
        super().__init__(causal=causal, dropout=dropout)
        require_single_head("simple", num_heads)
        if d_out != d_in or d_v not in (None, d_in):
            raise ValueError(f"d_out must equal d_in for 'simple' (it has no weights), got d_in={d_in}, d_out={d_out}")
        if qkv_bias:
            raise ValueError("qkv_bias must be False for 'simple': it has no query/key/value weights")
        if normalize not in NORMALIZATIONS:
            raise ValueError(f"normalize must be one of {', '.join(NORMALIZATIONS)}, got {normalize!r}")
        self.normalize = normalize
        self.output_dim = d_in

    def project(self, x: Tensor, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x = x.unsqueeze(1)  # (B, 1, T, d_in): the inputs are their own queries, keys and values
        return x, x, x

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool) -> AttentionOutput:
        if self.normalize == "softmax":
            return attend(q, k, v, causal=self.causal, mask=mask, scale=1.0, need_weights=need_weights,
                          dropout_p=self.dropout if self.training else 0.0)
        scores = q @ k.transpose(-2, -1)  # (B, 1, T, T)
        if self.causal:
            allowed = causal_mask(q.shape[-2], k.shape[-2], q.device)
            mask = allowed if mask is None else mask & allowed
        if mask is not None:
            scores = scores.masked_fill(~mask, 0.0)
        totals = scores.sum(dim=-1, keepdim=True)
        weights = torch.where(totals == 0, torch.zeros_like(scores), scores / totals)
        return AttentionOutput(weights @ v, weights if need_weights else None)
