"""Command-line overrides as text: which arguments are overrides, and the key each one sets."""

from __future__ import annotations


def is_override(arg: str) -> bool:
    return not arg.startswith("-") and ("=" in arg or arg.startswith("~"))


def override_key(override: str) -> str:
    """`+task.max_len=6` -> `task.max_len`."""
    return override.split("=", 1)[0].lstrip("+~")
