"""Multi-head attention with split heads and an output projection (ch. 3 MultiHeadAttention, 004).

With ``kv_heads`` < num_heads it is grouped-query attention (Ainslie et al. 2023, "GQA"; ch. 4 of
"Build an LLM from scratch"): keys and values have only ``kv_heads`` heads, each shared by
num_heads / kv_heads query heads. ``kv_heads=1`` is multi-query attention (Shazeer 2019).
"""

from __future__ import annotations

from torch import Tensor, nn

from attention_lab.attention.arguments import check_split_heads
from attention_lab.attention.base import AttentionModule
from attention_lab.attention.registry import register


@register("multihead")
class MultiHeadAttention(AttentionModule):
    """Project to d_out once, split into num_heads heads of head_dim = d_out / num_heads,
    attend per head, concatenate, then mix the heads with ``out_proj``."""

    takes_source = False
    multi_head = True
    grouped_kv = True
    projects = True

    def __init__(self, d_in: int, d_out: int, *, d_v: int | None = None, qkv_bias: bool = False, **common) -> None:
        super().__init__(**common)
        check_split_heads("multihead", d_out, self.num_heads, d_v)
        self.head_dim = d_out // self.num_heads
        kv_width = self.kv_heads * self.head_dim  # = d_out without grouping
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, kv_width, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, kv_width, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # combines the heads' outputs
        self.output_dim = d_out

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

    def merge(self, context: Tensor) -> Tensor:
        return self.out_proj(super().merge(context))  # (B, T_q, d_out)
