"""Self-attention without trainable weights (ch. 3 §3.3.1 of "Build an LLM from scratch")."""

from __future__ import annotations

import torch
from torch import Tensor

from attention_lab.attention.base import AttentionModule
from attention_lab.attention.errors import AttentionArgumentError
from attention_lab.attention.functional import AttentionOutput, attend
from attention_lab.attention.masks import allowed_keys
from attention_lab.attention.registry import register


@register("simple")
class SimpleAttention(AttentionModule):
    """No trainable weights: scores = x·xᵀ (unscaled, as in the notebook), weights = softmax(scores), context =
    weights·x.

    ``normalize="sum"`` divides the scores by their row sum instead: the naive normalisation the
    notebook shows before explaining why softmax is better.
    """

    origin = "ch. 3 §3.3"
    summary = "no trainable weights: scores = x·xᵀ (unscaled), softmax, context = weights·x"

    takes_source = False
    multi_head = False
    grouped_kv = False
    projects = False  # the inputs are their own queries and keys: no rope, no alibi
    learned_heads = False  # no weights of its own: no learned head to switch off
    options = ("normalize",)
    choices = {"normalize": ("softmax", "sum")}

    def __init__(self, d_in: int, d_out: int, *, d_v: int | None = None, qkv_bias: bool = False,
                 normalize: str = "softmax", **common) -> None:
        super().__init__(**common)
        if d_out != d_in:
            raise AttentionArgumentError(
                "d_out", d_out, f"d_in ({d_in}) for 'simple'",
                f"d_out must equal d_in for 'simple' (it has no weights), got d_in={d_in}, d_out={d_out}")
        if d_v not in (None, d_in):
            raise AttentionArgumentError(
                "d_v", d_v, f"None or d_in ({d_in}) for 'simple'",
                f"d_out must equal d_in for 'simple' (it has no weights), and so must d_v, got d_v={d_v}")
        if qkv_bias:
            raise AttentionArgumentError("qkv_bias", qkv_bias, "False for 'simple'",
                                         "qkv_bias must be False for 'simple': it has no query/key/value weights")
        self.normalize = normalize
        self.head_dim = d_in
        self.output_dim = d_in

    def project(self, x: Tensor, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x = x.unsqueeze(1)  # (B, 1, T, d_in): the inputs are their own queries, keys and values
        return x, x, x

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool) -> AttentionOutput:
        if self.normalize == "softmax":
            return attend(q, k, v, causal=self.causal, mask=mask, window=self.window, scale=1.0,
                          need_weights=need_weights, dropout_p=self.dropout if self.training else 0.0,
                          **self.score_hooks())
        scores = q @ k.transpose(-2, -1)  # (B, 1, T, T)
        allowed = allowed_keys(q.shape[-2], k.shape[-2], causal=self.causal, window=self.window, mask=mask,
                               device=q.device)
        if allowed is not None:
            scores = scores.masked_fill(~allowed, 0.0)
        scores = self.hook_scores(scores)
        totals = scores.sum(dim=-1, keepdim=True)
        weights = self.hook_weights(torch.where(totals == 0, torch.zeros_like(scores), scores / totals))
        return AttentionOutput(weights @ v, weights if need_weights else None)
