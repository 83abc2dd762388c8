"""The one error a bad finding command or results file raises: where (the option, or the file), the value, and what
is allowed, printed as one line by ``scripts/findings.py``."""

from __future__ import annotations

from attention_lab.errors import ReviewError


class FindingError(ReviewError):
    def __init__(self, where: str, value: str, allowed: str) -> None:
        self.where, self.value, self.allowed = where, value, allowed
        super().__init__(f"{where} {value} is invalid: {allowed}")
