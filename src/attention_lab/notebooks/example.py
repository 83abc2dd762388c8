"""One printed result of a reference notebook, and its comparison with what the library computes.

Tolerances follow the printed precision: one unit in the last printed decimal (half a unit of
rounding plus as much again for float32 summation order); numbers printed in scientific notation
get the same relative to their size, and integers must match exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch import Tensor


@dataclass(frozen=True)
class Example:
    """One printed result of a notebook and how the library computes it.

    ``expected`` is a number or nested list as the notebook printed it; ``compute()`` returns a
    tensor, array or number of the same shape. ``decimals`` is how many decimals the notebook
    printed (None: integers or booleans, compared exactly); ``scientific`` means they were
    printed as a mantissa in scientific notation (so the tolerance is relative).
    """

    name: str
    notebook: str
    expected: Any
    compute: Callable[[], Any]
    decimals: int | None = 4
    scientific: bool = False

    @property
    def tolerance(self) -> tuple[float, float]:
        """(atol, rtol): one unit in the last printed decimal."""
        if self.decimals is None:
            return 0.0, 0.0
        unit = 10.0 ** -self.decimals
        return (0.0, unit) if self.scientific else (unit, 0.0)


@dataclass(frozen=True)
class Comparison:
    example: Example
    expected: np.ndarray
    ours: np.ndarray
    max_error: float  # largest |ours - expected| (inf on a shape mismatch)
    ok: bool


def as_array(value: Any) -> np.ndarray:
    """Tensor / ndarray / number / nested list -> float64 ndarray."""
    if isinstance(value, Tensor):
        value = value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=np.float64)


def compare(example: Example) -> Comparison:
    """Run ``example.compute()`` and compare it with the notebook's number."""
    expected = as_array(example.expected)
    ours = as_array(example.compute())
    if ours.shape != expected.shape:
        return Comparison(example, expected, ours, float("inf"), False)
    atol, rtol = example.tolerance
    error = np.abs(ours - expected)
    max_error = float(error.max()) if error.size else 0.0
    ok = bool(np.all(error <= atol + rtol * np.abs(expected)))
    return Comparison(example, expected, ours, max_error, ok)
