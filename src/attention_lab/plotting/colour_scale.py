"""The colour scale of an attention map, from what the variant's weights are (its declared ``kind``).

Row-stochastic and sigmoid weights lie in [0, 1] by construction: they keep the fixed 0–1 scale, so that maps of
two runs compare by colour. Any other kind (diff's signed difference of two softmaxes, a recurrence's implied map,
a long convolution's kernel) can be negative or exceed 1: it gets a diverging scale symmetric around 0, bounded by
the largest |weight| of the maps drawn together, and a colorbar label that says so (white is 0, red positive,
blue negative)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

# The kinds whose weights lie in [0, 1] (AttentionModule.kind): softmax rows, φ(q)·φ(k) rows, sigmoids.
UNIT_INTERVAL_KINDS = frozenset({"softmax", "linear", "sigmoid"})
SIGNED_CMAP = "RdBu_r"
UNIT_CMAP = "viridis"


@dataclass(frozen=True)
class ColourScale:
    vmin: float
    vmax: float
    cmap: str
    label: str

    @property
    def signed(self) -> bool:
        return self.vmin < 0

    def as_dict(self) -> dict[str, object]:
        """For the HTML head view and the TensorBoard tab (JSON)."""
        return {"vmin": self.vmin, "vmax": self.vmax, "signed": self.signed, "label": self.label}


UNIT_SCALE = ColourScale(0.0, 1.0, UNIT_CMAP, "attention weight")


def colour_scale(kinds: Iterable[str], max_abs: float) -> ColourScale:
    """The scale for maps of these kinds (one per layer) whose largest |weight| is ``max_abs``."""
    if all(kind in UNIT_INTERVAL_KINDS for kind in kinds):
        return UNIT_SCALE
    # An all-zero map still gets a scale, and a map with NaN or inf (drawn as missing) a finite one.
    bound = float(max_abs) if math.isfinite(max_abs) and max_abs > 0 else 1.0
    return ColourScale(-bound, bound, SIGNED_CMAP, f"weight (signed: 0 is white, ±{bound:.3g} the largest |weight|)")
