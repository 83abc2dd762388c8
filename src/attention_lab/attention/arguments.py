"""The rules on attention arguments, each defined once and each failing with an AttentionArgumentError.

``build_attention`` applies them to its arguments; the config checks (:mod:`attention_lab.checks`) apply the same
functions to the config's settings, before torch is imported, and write the error's fields as one line. A rule
about a variant reads what the variant declares (its class, or :class:`~attention_lab.attention.declared.VariantFacts`,
which carry the same attribute names). ``heads_name`` and ``width_name`` let a caller name the numbers as its own
settings are named (the config's ``heads`` and ``d_model``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from attention_lab.attention.errors import AttentionArgumentError
from attention_lab.attention.positions import OUTSIDE_ATTENTION, POSITIONS


def one_of(items: Iterable[str]) -> str:
    """a, b or c."""
    items = list(items)
    return " or ".join(items) if len(items) < 3 else f"{', '.join(items[:-1])} or {items[-1]}"


def either(names: Iterable[str]) -> str:
    """'a', 'b' or 'c'."""
    return one_of(f"'{name}'" for name in names)


def divisors(number: int) -> str:
    """'1, 2, 3 or 6' for 6."""
    return one_of(str(d) for d in range(1, number + 1) if number % d == 0)


def accepted_positions(variant: Any) -> tuple[str, ...]:
    """rope and alibi act on a query-key score, so they need projections and one sequence for queries and keys."""
    return POSITIONS if variant.projects and not variant.takes_source else OUTSIDE_ATTENTION


def accepts_causal(variant: Any) -> bool:
    """A causal mask compares a query's position with a key's: meaningless when the keys are another sequence."""
    return not variant.takes_source


CAUSAL_ONLY_REASON = "it is a recurrence over time: each position reads only the state that the positions before it wrote"


def accepts_bidirectional(variant: Any) -> bool:
    """Whether a query may read later keys (mask=none or padding): not in a recurrence over time."""
    return not variant.causal_only


def check_causal_only(variant: str, cls: Any, causal: object) -> None:
    """A recurrence over time (``causal_only``) is causal or nothing."""
    if cls.causal_only and causal is not True:
        raise AttentionArgumentError(
            "causal", causal, f"True for '{variant}'",
            f"causal must be True for '{variant}' ({CAUSAL_ONLY_REASON}), got causal={causal!r}",
            reason=CAUSAL_ONLY_REASON)


def accepts_smeared_keys(variant: Any) -> bool:
    """Smeared keys mix each learned key with the one before it: a variant needs learned keys (``projects``) on the
    queries' own sequence, where "one position earlier" means something."""
    return variant.projects and not variant.takes_source


def check_smeared_keys(variant: str, cls: Any, smeared_keys: object, accepting_variants: Iterable[str]) -> None:
    check_flag("smeared_keys", smeared_keys)
    if smeared_keys and not accepts_smeared_keys(cls):
        why = "takes its keys from another sequence" if cls.takes_source else "has no learned keys for a query to score"
        allowed = f"false: '{variant}' {why}; smeared keys are for {either(accepting_variants)}"
        raise AttentionArgumentError("smeared_keys", smeared_keys, allowed,
                                     f"smeared_keys must be False for '{variant}': it {why}")


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
        raise AttentionArgumentError("window", window, "a positive integer, or unset for no window")


def check_heads_divide(variant: str, num_heads: int, width: int, *, width_name: str = "d_out",
                       heads_name: str = "num_heads", why: str = "the heads split it equally") -> None:
    """Heads share one width: num_heads divides it."""
    if width % num_heads:
        raise AttentionArgumentError(
            "num_heads", num_heads, f"a divisor of {width_name}={width}: {divisors(width)}",
            f"{heads_name} ({num_heads}) must divide {width_name} ({width}) for '{variant}' ({width_name} ({width}) "
            f"must be divisible by {heads_name} ({num_heads}): {why})", reason=why)


def check_single_head(variant: str, cls: Any, num_heads: int, multi_head_variants: Iterable[str]) -> None:
    if not cls.multi_head and num_heads != 1:
        several = either(multi_head_variants)
        raise AttentionArgumentError(
            "num_heads", num_heads, f"1 for '{variant}'",
            f"num_heads must be 1 for '{variant}' (a single head), got {num_heads}; use {several} for several heads",
            reason=f"it has a single head; {several} have several")


def check_kv_heads(variant: str, cls: Any, num_heads: int, kv_heads: object, grouped_variants: Iterable[str], *,
                   heads_name: str = "num_heads", unset_unless_grouped: bool = False) -> None:
    """kv_heads against the variant's ``grouped_kv``. kv_heads equal to num_heads is what an ungrouped variant does
    anyway; ``unset_unless_grouped`` refuses it too (the config's knob means nothing there)."""
    if kv_heads is None:
        return
    check_positive_int("kv_heads", kv_heads)
    if not cls.grouped_kv and (unset_unless_grouped or kv_heads != num_heads):
        grouped = either(grouped_variants)
        raise AttentionArgumentError(
            "kv_heads", kv_heads, f"unset for '{variant}'",
            f"kv_heads is for grouped-query attention ({grouped}); '{variant}' needs kv_heads=None, got {kv_heads!r}",
            reason=f"only {grouped} share keys and values between heads")
    if num_heads % kv_heads:
        raise AttentionArgumentError(
            "kv_heads", kv_heads, f"a divisor of {heads_name} ({num_heads}): {divisors(num_heads)}",
            f"kv_heads must be a divisor of {heads_name} ({num_heads}), got {kv_heads}: "
            "the query heads share the kv heads in equal groups", reason="the query heads share them in equal groups")


def check_heads(variant: str, cls: Any, num_heads: int, kv_heads: object,
                multi_head_variants: Iterable[str], grouped_variants: Iterable[str]) -> None:
    """num_heads against the variant's ``multi_head``, kv_heads against its ``grouped_kv``."""
    check_single_head(variant, cls, num_heads, multi_head_variants)
    check_kv_heads(variant, cls, num_heads, kv_heads, grouped_variants)


def check_position(variant: str, cls: Any, position: object) -> None:
    if position is not None and position not in POSITIONS:
        raise AttentionArgumentError("position", position, f"one of {', '.join(POSITIONS)} (or None)")
    allowed = accepted_positions(cls)
    if position is not None and position not in allowed:
        reason = cls.positions_note if not cls.projects else "its queries and keys come from different sequences"
        raise AttentionArgumentError(
            "position", position, f"one of {', '.join(allowed)} for '{variant}'",
            f"position={position!r} is not possible for '{variant}': {reason}; use one of {', '.join(allowed)}",
            reason=reason)


def check_rope_head_dim(variant: str, position: object, head_dim: int) -> None:
    """rope rotates feature pairs: the per-head query/key width must be even."""
    if position == "rope" and head_dim % 2:
        why = "rotary embeddings rotate pairs of dimensions, so the width of a head must be even"
        raise AttentionArgumentError(
            "position", position, f"another position: rope needs an even head dimension, and this one is {head_dim}",
            f"position='rope' needs an even head dimension, got {head_dim} for '{variant}'", reason=why)


def check_options(variant: str, cls: Any, options: Mapping[str, object]) -> None:
    """The variant's own keywords: only those it declares (``options``), each among its ``choices`` if it has any."""
    for option, value in options.items():
        if option not in cls.options:
            known = f"its options: {', '.join(cls.options)}" if cls.options else "it takes no other options"
            raise AttentionArgumentError(option, value, f"not set for '{variant}'",
                                         f"{option} is not an argument of '{variant}'; {known}", reason=known)
        choices = cls.choices.get(option)
        if choices is not None and value not in choices:
            raise AttentionArgumentError(option, value, f"one of {', '.join(map(str, choices))}")


def check_rejected(variant: str, cls: Any, *, window: object, dropout: object) -> None:
    """The shared arguments a variant refuses (its ``rejects``: linear and conv take no window and no dropout)."""
    if "window" in cls.rejects and window is not None:
        raise AttentionArgumentError(
            "window", window, f"unset for '{variant}'",
            f"window must be None for '{variant}': {cls.rejects['window']}, got window={window}",
            reason=cls.rejects["window"])
    if "dropout" in cls.rejects and dropout:
        raise AttentionArgumentError(
            "dropout", dropout, f"0 for '{variant}'",
            f"dropout must be 0.0 for '{variant}': {cls.rejects['dropout']}, got {dropout}",
            reason=cls.rejects["dropout"])


def check_split_heads(variant: str, d_out: int, num_heads: int, d_v: object) -> None:
    """Heads split one width: num_heads divides d_out, and d_v (if given) is d_out."""
    check_heads_divide(variant, num_heads, d_out)
    if d_v not in (None, d_out):
        raise AttentionArgumentError(
            "d_v", d_v, f"None or d_out ({d_out}) for '{variant}'",
            f"d_v must equal d_out for '{variant}' (heads split one width), got d_v={d_v}")
