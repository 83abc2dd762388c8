"""Multi-head attention as independent single heads side by side (001 MultiHeadAttention, ch. 3 wrapper)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attention_lab.attention.arguments import check_heads_divide
from attention_lab.attention.base import AttentionModule
from attention_lab.attention.registry import register
from attention_lab.attention.self_attention import SelfAttention


@register("multihead_concat")
class MultiHeadAttentionWrapper(AttentionModule):
    """``num_heads`` separate ``self`` heads; outputs concatenated: output dim = num_heads × d_v.

    The heads are created one after another, each with its own W_query, W_key, W_value, so the
    random initialisation matches the notebooks' loop over heads.
    """

    origin = "001 `MultiHeadAttention`, ch. 3 wrapper"
    summary = "`heads` independent `self` heads, concatenated"

    takes_source = False
    multi_head = True
    grouped_kv = False  # every head has its own keys and values
    projects = True

    @classmethod
    def d_out_for(cls, d_model: int, num_heads: int) -> int:
        check_heads_divide("multihead_concat", num_heads, d_model, width_name="d_model",
                           why="the heads' outputs are concatenated")
        return d_model // num_heads  # num_heads heads of this width side by side

    def __init__(self, d_in: int, d_out: int, *, d_v: int | None = None, qkv_bias: bool = False, **common) -> None:
        super().__init__(**common)
        # The heads only project: masks, positions and dropout apply once, to all heads together.
        self.heads = nn.ModuleList(SelfAttention(d_in, d_out, d_v=d_v, qkv_bias=qkv_bias)
                                   for _ in range(self.num_heads))
        self.head_dim = d_out
        self.output_dim = self.num_heads * self.heads[0].output_dim

    def project(self, x: Tensor, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # Each head gives (B, 1, T, d); stacking them on dim 1 runs all heads in one attend call.
        per_head = [head.project(x, source) for head in self.heads]
        queries, keys, values = (torch.cat(parts, dim=1) for parts in zip(*per_head, strict=True))
        return queries, keys, values
