"""Names that come from people and from data, read one way everywhere: the "; did you mean X?" of an error line
(one rule for a misspelt setting, ``haeds=3``; a key added with ``+``, ``+task.lenght=3``; an option of a config
group, ``model=selff``, ``model=Multihead``), and the number a name writes (a job dir, a layer or head in a tag)."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(typed: str, names: Iterable[str], cutoff: float = 0.6) -> str | None:
    """The name in ``names`` nearest to ``typed`` by difflib's similarity ratio, case aside; None when none is at
    least ``cutoff`` alike."""
    by_folded = {name.casefold(): name for name in names}
    match = difflib.get_close_matches(typed.casefold(), list(by_folded), n=1, cutoff=cutoff)
    return by_folded[match[0]] if match else None


def did_you_mean(typed: str, names: Iterable[str], prefix: str = "", cutoff: float = 0.6) -> str:
    """``"; did you mean <prefix><name>?"`` for the name nearest to ``typed``, or "" when none is near."""
    match = closest(typed, names, cutoff)
    return f"; did you mean {prefix}{match}?" if match else ""

def natural(text: str) -> int | None:
    """The non-negative integer that ``text`` writes in ASCII digits, else None: for the numbers in names that come
    from data (a job dir's name, a layer, head or index in a TensorBoard tag, a key of a record). ``str.isdigit``
    also holds for characters such as "²", which ``int`` refuses, and ``str.isdecimal`` for the digits of other
    scripts ("٣"), which would name job 3 a second time."""
    return int(text) if text.isascii() and text.isdigit() else None
