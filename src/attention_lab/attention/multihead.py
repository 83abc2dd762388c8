"""Multi-head attention with split heads and an output projection (ch. 3 MultiHeadAttention, 004)."""

from __future__ import annotations

from torch import Tensor, nn

from attention_lab.attention.base import AttentionModule
from attention_lab.attention.registry import register


@register("multihead")
class MultiHeadAttention(AttentionModule):
    """Project to d_out once, split into num_heads heads of head_dim = d_out / num_heads,
    attend per head, concatenate, then mix the heads with ``out_proj``."""

    def __init__(self, d_in: int, d_out: int, *, num_heads: int = 1, d_v: int | None = None,
                 qkv_bias: bool = False, dropout: float = 0.0, causal: bool = False) -> None:
        super().__init__(causal=causal, dropout=dropout)
        if d_out % num_heads:
            raise ValueError(f"d_out ({d_out}) must be divisible by num_heads ({num_heads}) for 'multihead'")
        if d_v not in (None, d_out):
            raise ValueError(f"d_v must equal d_out for 'multihead' (heads split one width), got d_v={d_v}")
        self.num_heads = num_heads
        self.head_dim = d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)  # combines the heads' outputs
        self.output_dim = d_out

    def split_heads(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape  # (B, T, d_out) -> (B, H, T, head_dim)
        return x.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)

    def project(self, x: Tensor, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        queries = self.split_heads(self.W_query(x))
        keys = self.split_heads(self.W_key(source))
        values = self.split_heads(self.W_value(source))
        return queries, keys, values

    def merge(self, context: Tensor) -> Tensor:
        return self.out_proj(super().merge(context))  # (B, T_q, d_out)
