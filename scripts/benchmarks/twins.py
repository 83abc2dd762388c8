"""Hand-written references for section A: the shortest modules that compute what our variants compute,
each on ``F.scaled_dot_product_attention`` with a causal mask. Ours must keep up with them.

The parameter names are those of ``attention_lab``'s multihead (W_query, W_key, W_value, out_proj), so the
tests can load our weights into a twin and compare the outputs.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class PlainCausalMHA(nn.Module):
    """The reference of ch. 3's comparison: one combined qkv Linear, SDPA(is_causal=True), out Linear."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        # (B, T, 3d) -> (3, B, H, T, head_dim)
        queries, keys, values = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        context = F.scaled_dot_product_attention(queries, keys, values, is_causal=True)
        return self.out_proj(context.transpose(1, 2).reshape(b, t, d))


class TwinBase(nn.Module):
    """Separate W_query, W_key, W_value (keys and values: kv_heads heads) and out_proj, heads split by view."""

    def __init__(self, d_model: int, heads: int, kv_heads: int | None = None) -> None:
        super().__init__()
        self.heads, self.kv_heads = heads, kv_heads or heads
        self.head_dim = d_model // heads
        self.W_query = nn.Linear(d_model, d_model, bias=False)
        self.W_key = nn.Linear(d_model, self.kv_heads * self.head_dim, bias=False)
        self.W_value = nn.Linear(d_model, self.kv_heads * self.head_dim, bias=False)
        self.out_proj = nn.Linear(d_model, d_model)

    def split(self, x: Tensor, heads: int) -> Tensor:
        b, t, _ = x.shape  # (B, T, heads * head_dim) -> (B, heads, T, head_dim)
        return x.view(b, t, heads, self.head_dim).transpose(1, 2)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return (self.split(self.W_query(x), self.heads), self.split(self.W_key(x), self.kv_heads),
                self.split(self.W_value(x), self.kv_heads))

    def merge(self, context: Tensor) -> Tensor:
        b, h, t, d = context.shape  # (B, H, T, head_dim) -> (B, T, H * head_dim)
        return self.out_proj(context.transpose(1, 2).reshape(b, t, h * d))


class GroupedQuerySDPA(TwinBase):
    """Grouped-query attention: query head h reads kv head h // (heads // kv_heads), SDPA's enable_gqa."""

    def forward(self, x: Tensor) -> Tensor:
        queries, keys, values = self.project(x)
        return self.merge(F.scaled_dot_product_attention(queries, keys, values, is_causal=True,
                                                         enable_gqa=self.kv_heads != self.heads))


def rotate_half(x: Tensor) -> Tensor:
    """(x1, x2) -> (-x2, x1) over the two halves of the last dimension (GPT-NeoX / Hugging Face LLaMA)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class RotarySDPA(TwinBase):
    """RoPE on queries and keys of every head (rotate-half convention, base 10000, positions 0..T-1)."""

    def __init__(self, d_model: int, heads: int, base: float = 10000.0) -> None:
        super().__init__(d_model, heads)
        inv_freq = 1.0 / base ** (torch.arange(0, self.head_dim, 2, dtype=torch.float32) / self.head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        queries, keys, values = self.project(x)
        positions = torch.arange(x.shape[1], device=x.device, dtype=self.inv_freq.dtype)
        angles = torch.outer(positions, self.inv_freq).repeat(1, 2)  # (T, head_dim): both halves alike
        cos, sin = angles.cos().to(x.dtype), angles.sin().to(x.dtype)
        queries = queries * cos + rotate_half(queries) * sin
        keys = keys * cos + rotate_half(keys) * sin
        return self.merge(F.scaled_dot_product_attention(queries, keys, values, is_causal=True))


def alibi_slopes(heads: int) -> list[float]:
    """The ALiBi paper's reference slopes: geometric from 2^(-8/H) for a power of two; otherwise those of
    the closest smaller power of two, then every other slope of the next power of two."""
    if math.log2(heads).is_integer():
        start = 2 ** (-8 / heads)
        return [start ** (i + 1) for i in range(heads)]
    closest = 2 ** math.floor(math.log2(heads))
    return alibi_slopes(closest) + alibi_slopes(2 * closest)[0::2][: heads - closest]


class AlibiSDPA(TwinBase):
    """ALiBi: -m_h * (i - j) added to head h's causal scores, as one additive float mask for SDPA."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__(d_model, heads)
        self.register_buffer("slopes", torch.tensor(alibi_slopes(heads)), persistent=False)

    def forward(self, x: Tensor) -> Tensor:
        queries, keys, values = self.project(x)
        t = x.shape[1]
        positions = torch.arange(t, device=x.device)
        distance = (positions[:, None] - positions[None, :]).to(x.dtype)  # (T, T): i - j
        bias = -self.slopes.to(x.dtype)[:, None, None] * distance  # (H, T, T)
        bias = bias.masked_fill(distance < 0, float("-inf"))  # causal: no key after the query
        return self.merge(F.scaled_dot_product_attention(queries, keys, values, attn_mask=bias))
