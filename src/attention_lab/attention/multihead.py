"""Multi-head attention with split heads and an output projection (ch. 3 MultiHeadAttention, 004).

With ``kv_heads`` < num_heads it is grouped-query attention (Ainslie et al. 2023, "GQA"; ch. 4 of
"Build an LLM from scratch"): keys and values have only ``kv_heads`` heads, each shared by
num_heads / kv_heads query heads. ``kv_heads=1`` is multi-query attention (Shazeer 2019).

``sink``: ``none``, ``zero`` (softmax off by one) or ``learned`` (a learned sink logit per head): an extra key of
value zero that takes what a query does not give the real keys (:mod:`attention_lab.attention.sink`). A subclass
that computes its own weights (overrides ``attend``) does not take it: it declares ``options`` without ``sink``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attention_lab.attention.arguments import check_split_heads
from attention_lab.attention.base import AttentionModule
from attention_lab.attention.errors import AttentionArgumentError
from attention_lab.attention.functional import AttentionOutput
from attention_lab.attention.registry import register


@register("multihead")
class MultiHeadAttention(AttentionModule):
    """Project to d_out once, split into num_heads heads of head_dim = d_out / num_heads,
    attend per head, concatenate, then mix the heads with ``out_proj``.
    """

    origin = "ch. 3 `MultiHeadAttention`, 004"
    summary = "split heads of `d_model / heads`, then `out_proj`"

    takes_source = False
    multi_head = True
    grouped_kv = True
    projects = True
    options = ("sink",)
    choices = {"sink": ("none", "zero", "learned")}

    def __init__(self, d_in: int, d_out: int, *, d_v: int | None = None, qkv_bias: bool = False, sink: str = "none",
                 **common) -> None:
        super().__init__(**common)
        if sink not in self.choices["sink"]:  # build_attention checks it first; a direct construction too
            raise AttentionArgumentError("sink", sink, f"one of {', '.join(self.choices['sink'])}")
        if sink != "none" and type(self).attend is not MultiHeadAttention.attend:
            why = "it computes its own weights, with no softmax for a sink to join"
            raise AttentionArgumentError("sink", sink, f"none for '{type(self).__name__}'", reason=why)
        check_split_heads("multihead", d_out, self.num_heads, d_v)
        self.head_dim = d_out // self.num_heads
        kv_width = self.kv_heads * self.head_dim  # = d_out without grouping
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, kv_width, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, kv_width, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # combines the heads' outputs
        self.output_dim = d_out
        self.sink = sink
        # The sink's logit per head: 0 for `zero` (a buffer), learned for `learned` (starting at 0, as `zero`).
        if sink == "learned":
            self.sink_logit = nn.Parameter(torch.zeros(self.num_heads))
        elif sink == "zero":
            self.register_buffer("sink_logit", torch.zeros(self.num_heads), persistent=False)

    def kv_cache_per_token(self) -> int | None:
        return 2 * self.kv_heads * self.head_dim  # a key and a value per kv head

    def split_heads(self, x: Tensor, heads: int) -> Tensor:
        b, t, _ = x.shape  # (B, T, heads * head_dim) -> (B, heads, T, head_dim)
        return x.view(b, t, heads, self.head_dim).transpose(1, 2)

    def project(self, x: Tensor, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        queries = self.split_heads(self.W_query(x), self.num_heads)
        keys = self.split_heads(self.W_key(source), self.kv_heads)
        values = self.split_heads(self.W_value(source), self.kv_heads)
        return queries, keys, values

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool) -> AttentionOutput:
        if self.sink == "none":
            return super().attend(q, k, v, mask, need_weights)
        from attention_lab.attention.sink import sink_attend  # imported by the runs that use a sink

        return sink_attend(q, k, v, self.sink_logit, causal=self.causal, mask=mask, window=self.window,
                           bias=self.position_bias(q, k), need_weights=need_weights,
                           dropout_p=self.dropout if self.training else 0.0, **self.score_hooks())

    def merge(self, context: Tensor) -> Tensor:
        return self.out_proj(super().merge(context))  # (B, T_q, d_out)
