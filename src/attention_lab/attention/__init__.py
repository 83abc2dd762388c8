"""Attention variants of the reference notebooks, one file each, built by name.

>>> from attention_lab.attention import build_attention
>>> attn = build_attention("multihead", d_in=16, d_out=16, num_heads=4, causal=True)
>>> context, weights = attn(x, need_weights=True)   # x: (T, 16) or (B, T, 16)

Mask conventions follow the PyTorch arguments of the same name: ``attend(mask=...)`` is like
``F.scaled_dot_product_attention``'s boolean ``attn_mask`` (True = may attend);
``key_padding_mask`` is like ``nn.MultiheadAttention``'s (True = padding, ignored).
"""

# Importing the variant modules registers them.
from attention_lab.attention import cross, multihead, multihead_concat, self_attention, simple  # noqa: F401
from attention_lab.attention.base import AttentionModule
from attention_lab.attention.functional import AttentionOutput, attend, causal_mask
from attention_lab.attention.registry import ATTENTION_REGISTRY, build_attention

VARIANTS = tuple(sorted(ATTENTION_REGISTRY))

__all__ = [
    "ATTENTION_REGISTRY",
    "VARIANTS",
    "AttentionModule",
    "AttentionOutput",
    "attend",
    "build_attention",
    "causal_mask",
]
