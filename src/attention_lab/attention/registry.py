"""Config names -> attention classes, and the one public constructor. The registry knows every variant's name from
the package's sources and imports a variant's module when its class is first used (:mod:`attention_lab.lazy_registry`):
a run imports the variants it builds, not all of them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from attention_lab.attention.arguments import (
    accepts_smeared_keys,
    check_causal_only,
    check_dropout,
    check_flag,
    check_heads,
    check_options,
    check_position,
    check_positive_int,
    check_rejected,
    check_rope_head_dim,
    check_smeared_keys,
    check_window,
)
from attention_lab.attention.base import AttentionModule
from attention_lab.attention.declared import NamesWhere
from attention_lab.attention.errors import AttentionArgumentError
from attention_lab.lazy_registry import LazyRegistry

ATTENTION_REGISTRY: LazyRegistry[type[AttentionModule]] = LazyRegistry(
    "attention_lab.attention", Path(__file__).resolve().parent, "register")
T = TypeVar("T", bound=type[AttentionModule])
DECLARED = ("takes_source", "multi_head", "grouped_kv", "projects")


def register(name: str) -> Callable[[T], T]:
    """Class decorator: ``build_attention(name, ...)`` builds this class."""

    def decorator(cls: T) -> T:
        missing = [attr for attr in DECLARED if not isinstance(getattr(cls, attr, None), bool)]
        if missing:
            raise TypeError(f"attention variant '{name}' ({cls.__name__}) must declare {', '.join(missing)} as bool")
        ATTENTION_REGISTRY.add(name, cls)
        return cls

    return decorator


def build_attention(
    name: str,
    *,
    d_in: int,
    d_out: int,
    num_heads: int = 1,
    kv_heads: int | None = None,
    d_v: int | None = None,
    qkv_bias: bool = False,
    dropout: float = 0.0,
    causal: bool = False,
    window: int | None = None,
    position: str | None = None,
    smeared_keys: bool = False,
    **options,
) -> AttentionModule:
    """Build the attention variant registered as ``name``.

    Parameters are created in the order W_query, W_key, W_value (then out_proj), so under
    ``torch.manual_seed(s)`` a module reproduces the reference notebooks' numbers.
    ``kv_heads`` < num_heads shares keys and values between query heads (grouped-query attention).
    ``window`` limits each query to the keys less than ``window`` positions away.
    ``position`` "rope" rotates queries and keys, "alibi" biases the scores by distance; None, "none",
    "learned" and "sinusoidal" add nothing here (the last two act on the embeddings).
    ``smeared_keys`` mixes each key with the previous one, with a learned share per head (Olsson et al. 2022).
    ``options`` go to the variant (e.g. ``normalize="sum"`` for ``simple``).
    Every rejected argument raises an :class:`AttentionArgumentError` naming it.
    """
    if name not in ATTENTION_REGISTRY:
        names = ", ".join(sorted(ATTENTION_REGISTRY))
        raise AttentionArgumentError("name", name, f"one of {names}", f"unknown attention {name!r}; valid names: {names}")
    cls = ATTENTION_REGISTRY[name]
    check_positive_int("d_in", d_in)
    check_positive_int("d_out", d_out)
    check_positive_int("num_heads", num_heads)
    if d_v is not None:
        check_positive_int("d_v", d_v)
    check_flag("qkv_bias", qkv_bias)
    check_dropout(dropout)
    check_flag("causal", causal)
    check_window(window)
    check_heads(name, cls, num_heads, kv_heads,
                multi_head_variants=NamesWhere("multi_head"), grouped_variants=NamesWhere("grouped_kv"))
    check_position(name, cls, position)
    check_rejected(name, cls, window=window, dropout=dropout)
    check_options(name, cls, options)
    check_causal_only(name, cls, causal)
    check_smeared_keys(name, cls, smeared_keys, NamesWhere(accepts_smeared_keys))
    module = cls(
        d_in, d_out, num_heads=num_heads, kv_heads=kv_heads, d_v=d_v, qkv_bias=qkv_bias,
        dropout=dropout, causal=causal, window=window, position=position, smeared_keys=smeared_keys, **options,
    )
    check_rope_head_dim(name, position, module.head_dim)
    return module
