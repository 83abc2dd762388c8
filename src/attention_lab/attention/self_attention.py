"""Scaled dot-product self-attention with trainable weights (000, 001 SelfAttention, ch. 3 SelfAttention_v2)."""

from __future__ import annotations

from torch import Tensor, nn

from attention_lab.attention.base import AttentionModule
from attention_lab.attention.registry import register


@register("self")
class SelfAttention(AttentionModule):
    """One head: queries, keys and values are linear projections of the same sequence.

    The key/query width (d_out) and the value width (d_v) may differ: notebook 000 uses
    d_q = d_k = 24 and d_v = 28.
    """

    origin = "notebooks 000, 001, ch. 3 `SelfAttention_v2`"
    summary = "`W_query`, `W_key`, `W_value`, scaled by √d_k; one head"

    takes_source = False
    multi_head = False
    grouped_kv = False
    projects = True

    def __init__(self, d_in: int, d_out: int, *, d_v: int | None = None, qkv_bias: bool = False, **common) -> None:
        super().__init__(**common)
        d_v = d_out if d_v is None else d_v
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_v, bias=qkv_bias)
        self.head_dim = d_out
        self.output_dim = d_v

    def project(self, x: Tensor, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # (B, T, d) -> (B, 1, T, d): a single head
        queries = self.W_query(x).unsqueeze(1)
        keys = self.W_key(source).unsqueeze(1)
        values = self.W_value(source).unsqueeze(1)
        return queries, keys, values
