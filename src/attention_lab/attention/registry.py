"""Config names -> attention classes, and the one public constructor."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from attention_lab.attention.base import AttentionModule, check_dropout, check_positive_int

ATTENTION_REGISTRY: dict[str, type[AttentionModule]] = {}
T = TypeVar("T", bound=type[AttentionModule])


def register(name: str) -> Callable[[T], T]:
    def decorator(cls: T) -> T:
        ATTENTION_REGISTRY[name] = cls
        return cls

    return decorator


def build_attention(
    name: str,
    *,
    d_in: int,
    d_out: int,
    num_heads: int = 1,
    d_v: int | None = None,
    qkv_bias: bool = False,
    dropout: float = 0.0,
    causal: bool = False,
    **options,
) -> AttentionModule:
    """Build the attention variant registered as ``name``.

    Parameters are created in the order W_query, W_key, W_value (then out_proj), so under
    ``torch.manual_seed(s)`` a module reproduces the reference notebooks' numbers.
    ``options`` go to the variant (e.g. ``normalize="sum"`` for ``simple``).
    """
    if name not in ATTENTION_REGISTRY:
        raise ValueError(f"unknown attention {name!r}; valid names: {', '.join(sorted(ATTENTION_REGISTRY))}")
    check_positive_int("d_in", d_in)
    check_positive_int("d_out", d_out)
    check_positive_int("num_heads", num_heads)
    if d_v is not None:
        check_positive_int("d_v", d_v)
    check_dropout(dropout)
    cls = ATTENTION_REGISTRY[name]
    return cls(
        d_in=d_in, d_out=d_out, num_heads=num_heads, d_v=d_v,
        qkv_bias=qkv_bias, dropout=dropout, causal=causal, **options,
    )
