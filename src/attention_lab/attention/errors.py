"""The error every bad attention argument raises: which argument, its value, and what is allowed."""

from __future__ import annotations


class AttentionArgumentError(ValueError):
    """A ``build_attention`` argument was rejected.

    ``argument`` is the argument's name as ``build_attention`` spells it (``"num_heads"``,
    ``"kv_heads"``, ``"window"``, ``"position"``, ...), ``value`` what was given and ``allowed`` a
    short text of what would be accepted, so callers can point at their own setting without reading
    the message. ``reason`` (may be empty) says why, in words that need no argument names. The message is one
    line that names the argument.
    """

    def __init__(self, argument: str, value: object, allowed: str, message: str | None = None, reason: str = "") -> None:
        self.argument = argument
        self.value = value
        self.allowed = allowed
        self.reason = reason
        super().__init__(message or f"{argument} must be {allowed}, got {value!r}")

    def __reduce__(self):
        # The default rebuilds from self.args (the message alone); keep the fields through pickling.
        return type(self), (self.argument, self.value, self.allowed, str(self), self.reason)
