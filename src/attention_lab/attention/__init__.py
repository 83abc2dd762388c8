"""Attention variants of the reference notebooks and of modern LLMs, one file each, built by name.

>>> from attention_lab.attention import build_attention
>>> attn = build_attention("multihead", d_in=16, d_out=16, num_heads=4, causal=True)
>>> context, weights = attn(x, need_weights=True)   # x: (T, 16) or (B, T, 16)

Mask conventions follow the PyTorch arguments of the same name: ``attend(mask=...)`` is like
``F.scaled_dot_product_attention``'s boolean ``attn_mask`` (True = may attend);
``key_padding_mask`` is like ``nn.MultiheadAttention``'s (True = padding, ignored).

A new variant is one file with a class decorated by ``@register("name")``: the registry reads the names from
the sources and imports a variant's module when its class is first used, so a run imports the variants it builds.
Importing the package itself imports no torch, so the config checks read the torch-free modules
(:mod:`.declared`, :mod:`.arguments`, :mod:`.errors`, :mod:`.positions`) in a fraction of torch's start-up time
(PEP 562 module ``__getattr__``).
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> the module that defines it
EXPORTS = {
    "ATTENTION_REGISTRY": "registry",
    "build_attention": "registry",
    "AttentionModule": "base",
    "AttentionArgumentError": "errors",
    "AttentionOutput": "functional",
    "attend": "functional",
    "causal_mask": "masks",
}


def __getattr__(name: str) -> Any:
    if name == "VARIANTS":  # the registered names, read from the sources: no variant is imported
        return tuple(sorted(importlib.import_module(f"{__name__}.registry").ATTENTION_REGISTRY))
    if name in EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["VARIANTS", *EXPORTS]
