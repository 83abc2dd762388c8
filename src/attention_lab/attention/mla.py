"""Multi-head latent attention (DeepSeek-AI 2024, "DeepSeek-V2", section 2.1; ch. 4 bonus "05_mla" of "Build an
LLM from scratch").

Keys and values come from one shared low-rank latent per token, c_KV = W_DKV x of width d_c (``kv_latent``,
d_c ≪ H·d_h): k_C = W_UK c_KV and v = W_UV c_KV per head. RoPE is decoupled: a small per-head query part
q_R = RoPE(W_QR ·) and ONE rotated key part k_R = RoPE(W_KR x) of width d_h^R (``rope_dim``) shared by every head
are concatenated to the content parts, q = [q_C; q_R], k = [k_C; k_R], and the scores are q·kᵀ/√(d_h + d_h^R).
Queries can be low-rank too (``q_latent``: c_Q = W_DQ x, then q_C = W_UQ c_Q, q_R from c_Q). As in DeepSeek-V2
(section 3.1.2, and its code's ``kv_a_layernorm`` and ``q_a_layernorm``), each latent passes an RMSNorm with a
learned scale before it is expanded (``latent_norm``, default on): c_KV -> k_C and v, c_Q -> q_C and q_R; the
RoPE key k_R, computed from x, is not normalised.

A decoder caches only c_KV and k_R: (d_c + d_h^R) numbers per token and layer, against 2·kv_heads·d_h for
``multihead``. The softmax is ``multihead``'s (same fused kernel, same weights path through the hooks).
``position=rope`` is this decoupled RoPE (only the d_h^R parts rotate: rotating the content keys would tie them to
their positions, so that a decoder could not cache the latent alone); with another position there is no RoPE part.

Left out of the paper's attention: the extra scaling factors DeepSeek-V2 multiplies at the latent bottlenecks
(section 3.1.2, for stable training at scale); heads wider than the model's width allows (DeepSeek-V2: 128 heads
of d_h = 128 at d_model 5,120; here d_h = d_model / heads); YaRN's extension of the RoPE part to long contexts;
and the decoding trick of absorbing W_UK into the queries and W_UV into W_O (a speed-up of inference that computes
the same output).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor, nn

from attention_lab.attention.arguments import check_flag, check_positive_int, check_split_heads
from attention_lab.attention.base import AttentionModule
from attention_lab.attention.errors import AttentionArgumentError
from attention_lab.attention.registry import register
from attention_lab.attention.rope import apply_rope

LATENT_NORM_EPS = 1e-6  # DeepSeek-V2's RMSNorm epsilon (its config's rms_norm_eps)


def check_optional_width(argument: str, value: object) -> None:
    if value is not None:
        check_positive_int(argument, value)


@register("mla")
class MultiHeadLatentAttention(AttentionModule):
    """c_KV = `W_kv_down` x (`kv_latent` wide), keys `W_key` c_KV and values `W_value` c_KV per head; queries
    full-rank or from a latent (`q_latent`); with `position="rope"` a per-head RoPE query part and one shared RoPE
    key (`rope_dim` wide) concatenated to the content parts; a KV cache of `kv_latent + rope_dim` numbers per token
    and layer; no `kv_heads`.

    W_kv_down (x -> c_KV), W_key / W_value (c_KV -> per-head keys / values), W_key_rope (x -> the shared RoPE
    key), W_query and W_query_rope (from x, or from c_Q = W_q_down x), out_proj.

    ``kv_latent`` d_c (None: 4·d_h, DeepSeek-V2's ratio), ``rope_dim`` d_h^R (position=rope only; None: d_h / 2,
    rounded down to an even width, DeepSeek-V2's ratio), ``q_latent`` d_c' (None: full-rank queries),
    ``latent_norm``: an RMSNorm (`kv_norm`, `q_norm`) on c_KV and c_Q before they are expanded (DeepSeek-V2's).
    """

    origin = "DeepSeek-AI 2024, *DeepSeek-V2*"
    summary = (
        "multi-head latent attention: keys and values from one shared low-rank latent, decoupled RoPE keys; a small KV"
        " cache"
    )

    takes_source = False
    multi_head = True
    grouped_kv = False
    projects = True
    kind = "softmax"
    options = ("kv_latent", "q_latent", "rope_dim", "latent_norm")

    @classmethod
    def options_before(cls, num_heads: int) -> dict[str, Any]:
        return {"latent_norm": False}  # the latents' RMSNorm came later: runs saved before it have none
    positions_note = "its RoPE is decoupled (rope_dim sets the rotated part)"

    @classmethod
    def state_size(cls, d_model: int, num_heads: int, seq_len: int, kv_latent: int | None = None, **options) -> int:
        """The latent KV cache: ``kv_latent`` numbers a token (default 4 · d_h; ``kv_cache_per_token`` adds the
        shared RoPE key where ``position=rope``)."""
        return seq_len * (4 * (d_model // num_heads) if kv_latent is None else kv_latent)

    def __init__(self, d_in: int, d_out: int, *, d_v: int | None = None, qkv_bias: bool = False,
                 kv_latent: int | None = None, q_latent: int | None = None, rope_dim: int | None = None,
                 latent_norm: bool = True, **common) -> None:
        check_optional_width("kv_latent", kv_latent)
        check_flag("latent_norm", latent_norm)
        check_optional_width("q_latent", q_latent)
        rotated = common.get("position") == "rope"
        if rope_dim is not None and not rotated:
            why = "only position=rope has a decoupled RoPE part"
            raise AttentionArgumentError("rope_dim", rope_dim, "null unless position=rope", f"rope_dim={rope_dim} is "
                                         f"not possible for 'mla' without position=rope: {why}", reason=why)
        if rope_dim is not None and (isinstance(rope_dim, bool) or not isinstance(rope_dim, int)
                                     or rope_dim <= 0 or rope_dim % 2):
            raise AttentionArgumentError("rope_dim", rope_dim, "a positive even integer, or null for head dim / 2")
        super().__init__(**common)
        self.position = None if rotated else self.position  # forward() must not rotate every feature: project() does
        check_split_heads("mla", d_out, self.num_heads, d_v)
        self.head_dim = d_out // self.num_heads
        self.kv_latent = 4 * self.head_dim if kv_latent is None else kv_latent
        self.rope_dim = 0 if not rotated else (self.head_dim // 2) // 2 * 2 if rope_dim is None else rope_dim
        self.q_latent = q_latent
        self.W_q_down = None if q_latent is None else nn.Linear(d_in, q_latent, bias=qkv_bias)
        q_in = d_in if q_latent is None else q_latent
        self.W_query = nn.Linear(q_in, d_out, bias=qkv_bias)  # W_UQ: the content part of every head
        self.W_kv_down = nn.Linear(d_in, self.kv_latent, bias=qkv_bias)  # W_DKV: x -> c_KV
        self.W_key = nn.Linear(self.kv_latent, d_out, bias=qkv_bias)  # W_UK
        self.W_value = nn.Linear(self.kv_latent, d_out, bias=qkv_bias)  # W_UV
        rotated = self.rope_dim > 0  # (d_h = 1 leaves no even width to rotate)
        self.W_query_rope = nn.Linear(q_in, self.num_heads * self.rope_dim, bias=qkv_bias) if rotated else None  # W_QR
        self.W_key_rope = nn.Linear(d_in, self.rope_dim, bias=qkv_bias) if rotated else None  # W_KR: shared by all heads
        self.out_proj = nn.Linear(d_out, d_out)
        self.output_dim = d_out
        # Made last, and from no random numbers: a seed builds the same projections with or without them.
        self.kv_norm = nn.RMSNorm(self.kv_latent, eps=LATENT_NORM_EPS) if latent_norm else None
        self.q_norm = nn.RMSNorm(q_latent, eps=LATENT_NORM_EPS) if latent_norm and q_latent is not None else None

    def kv_cache_per_token(self) -> int | None:
        return self.kv_latent + self.rope_dim  # c_KV and the shared RoPE key

    def split_heads(self, x: Tensor, heads: int) -> Tensor:
        b, t, _ = x.shape  # (B, T, heads * width) -> (B, heads, T, width)
        return x.view(b, t, heads, -1).transpose(1, 2)

    def project(self, x: Tensor, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        q_in = x if self.W_q_down is None else self.W_q_down(x)  # (B, T, d_in or d_c')
        if self.q_norm is not None:
            q_in = self.q_norm(q_in)
        latent = self.W_kv_down(source)  # c_KV: (B, T, d_c), what a decoder caches (with k_R)
        if self.kv_norm is not None:
            latent = self.kv_norm(latent)
        q_content = self.split_heads(self.W_query(q_in), self.num_heads)  # (B, H, T, d_h)
        k_content = self.split_heads(self.W_key(latent), self.num_heads)  # (B, H, T, d_h)
        values = self.split_heads(self.W_value(latent), self.num_heads)  # (B, H, T, d_h)
        if self.rope_dim == 0:
            return q_content, k_content, values
        q_rope = self.split_heads(self.W_query_rope(q_in), self.num_heads)  # (B, H, T, d_h^R)
        k_rope = self.W_key_rope(source).unsqueeze(1)  # (B, 1, T, d_h^R): one for all heads
        q_rope, k_rope = apply_rope(q_rope, k_rope)
        queries = torch.cat([q_content, q_rope], dim=-1)  # (B, H, T, d_h + d_h^R)
        keys = torch.cat([k_content, k_rope.expand(-1, self.num_heads, -1, -1)], dim=-1)  # (B, H, T, d_h + d_h^R)
        return queries, keys, values

    def merge(self, context: Tensor) -> Tensor:
        return self.out_proj(super().merge(context))  # (B, T_q, d_out)

