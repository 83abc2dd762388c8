"""Attention variants of the reference notebooks and of modern LLMs, one file each, built by name.

>>> from attention_lab.attention import build_attention
>>> attn = build_attention("multihead", d_in=16, d_out=16, num_heads=4, causal=True)
>>> context, weights = attn(x, need_weights=True)   # x: (T, 16) or (B, T, 16)

Mask conventions follow the PyTorch arguments of the same name: ``attend(mask=...)`` is like
``F.scaled_dot_product_attention``'s boolean ``attn_mask`` (True = may attend);
``key_padding_mask`` is like ``nn.MultiheadAttention``'s (True = padding, ignored).

Every module of this package is imported here, so a new variant is one file with a class
decorated by ``@register("name")``.
"""

import importlib
import pkgutil

from attention_lab.attention.base import AttentionModule
from attention_lab.attention.errors import AttentionArgumentError
from attention_lab.attention.functional import AttentionOutput, attend
from attention_lab.attention.masks import causal_mask
from attention_lab.attention.registry import ATTENTION_REGISTRY, build_attention


def import_all_modules() -> None:
    """Import every module of the package: importing a variant's module registers it."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{module.name}")


import_all_modules()
VARIANTS = tuple(sorted(ATTENTION_REGISTRY))

__all__ = [
    "ATTENTION_REGISTRY",
    "VARIANTS",
    "AttentionArgumentError",
    "AttentionModule",
    "AttentionOutput",
    "attend",
    "build_attention",
    "causal_mask",
]
