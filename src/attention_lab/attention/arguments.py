"""Checks of the arguments every variant shares, each failing with an AttentionArgumentError."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from attention_lab.attention.errors import AttentionArgumentError

# Where positions come from. Only rope and alibi act inside attention; learned and sinusoidal tables
# are added to the embeddings before it, and none is no position at all (NoPE).
POSITIONS = ("none", "learned", "sinusoidal", "rope", "alibi")
INSIDE_ATTENTION = ("rope", "alibi")
OUTSIDE_ATTENTION = tuple(p for p in POSITIONS if p not in INSIDE_ATTENTION)


def either(names: Iterable[str]) -> str:
    """'a', 'b' or 'c'."""
    quoted = [f"'{name}'" for name in names]
    return " or ".join(quoted) if len(quoted) < 3 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def check_positive_int(argument: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise AttentionArgumentError(argument, value, "a positive integer")


def check_flag(argument: str, value: object) -> None:
    if not isinstance(value, bool):
        raise AttentionArgumentError(argument, value, "True or False")


def check_dropout(dropout: object) -> None:
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
        raise AttentionArgumentError("dropout", dropout, "a number in [0, 1)")


def check_window(window: object) -> None:
    if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window <= 0):
        raise AttentionArgumentError("window", window, "a positive integer, or None for no window")


def check_heads(variant: str, cls: type, num_heads: int, kv_heads: object,
                multi_head_variants: Iterable[str], grouped_variants: Iterable[str]) -> None:
    """num_heads against the variant's `multi_head`, kv_heads against its `grouped_kv`."""
    if not cls.multi_head and num_heads != 1:
        raise AttentionArgumentError(
            "num_heads", num_heads, f"1 for '{variant}'",
            f"num_heads must be 1 for '{variant}' (a single head), got {num_heads}; "
            f"use {either(multi_head_variants)} for several heads",
        )
    if kv_heads is None:
        return
    check_positive_int("kv_heads", kv_heads)
    if not cls.grouped_kv and kv_heads != num_heads:
        raise AttentionArgumentError(
            "kv_heads", kv_heads, f"None for '{variant}'",
            f"kv_heads is for grouped-query attention ({either(grouped_variants)}); "
            f"'{variant}' needs kv_heads=None, got {kv_heads!r}",
        )
    if num_heads % kv_heads:
        raise AttentionArgumentError(
            "kv_heads", kv_heads, f"a divisor of num_heads ({num_heads})",
            f"kv_heads must be a divisor of num_heads ({num_heads}), got {kv_heads}: "
            "the query heads share the kv heads in equal groups",
        )


def check_position(variant: str, cls: type, position: object) -> None:
    if position is not None and position not in POSITIONS:
        raise AttentionArgumentError("position", position, f"one of {', '.join(POSITIONS)} (or None)")
    if position in INSIDE_ATTENTION and (not cls.projects or cls.takes_source):
        reason = cls.positions_note if not cls.projects else "its queries and keys come from different sequences"
        allowed = ", ".join(OUTSIDE_ATTENTION)
        raise AttentionArgumentError(
            "position", position, f"one of {allowed} for '{variant}'",
            f"position={position!r} is not possible for '{variant}': {reason}; use one of {allowed}",
        )


def check_rope_head_dim(variant: str, position: object, head_dim: int) -> None:
    """rope rotates feature pairs: the per-head query/key width must be even."""
    if position == "rope" and head_dim % 2:
        raise AttentionArgumentError(
            "position", position, f"not 'rope' with an odd head dimension ({head_dim})",
            f"position='rope' needs an even head dimension, got {head_dim} for '{variant}'",
        )


def check_options(variant: str, cls: type, options: Mapping[str, object]) -> None:
    for option, value in options.items():
        if option not in cls.options:
            known = f"its options: {', '.join(cls.options)}" if cls.options else "it takes no other options"
            raise AttentionArgumentError(option, value, f"not set for '{variant}' ({known})",
                                         f"{option} is not an argument of '{variant}'; {known}")


def check_split_heads(variant: str, d_out: int, num_heads: int, d_v: object) -> None:
    """Heads split one width: num_heads divides d_out, and d_v (if given) is d_out."""
    if d_out % num_heads:
        raise AttentionArgumentError(
            "num_heads", num_heads, f"a divisor of d_out ({d_out})",
            f"d_out ({d_out}) must be divisible by num_heads ({num_heads}) for '{variant}'")
    if d_v not in (None, d_out):
        raise AttentionArgumentError(
            "d_v", d_v, f"None or d_out ({d_out}) for '{variant}'",
            f"d_v must equal d_out for '{variant}' (heads split one width), got d_v={d_v}")


def reject_window_and_dropout(variant: str, window: object, dropout: float, *, window_why: str, dropout_why: str) -> None:
    """A mixer without a T x T map on its fast path takes no window and no attention dropout."""
    if window is not None:
        raise AttentionArgumentError(
            "window", window, f"None for '{variant}'",
            f"window must be None for '{variant}': {window_why}, got window={window}")
    if dropout:
        raise AttentionArgumentError(
            "dropout", dropout, f"0.0 for '{variant}'",
            f"dropout must be 0.0 for '{variant}': {dropout_why}, got {dropout}")
