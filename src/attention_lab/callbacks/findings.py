"""Callbacks whose findings go into the run's metrics.json (beside the final metrics), e.g. when the induction
heads formed."""

from __future__ import annotations

from typing import Any

import lightning as L


class Findings(L.Callback):
    """train() adds :meth:`findings` of each such callback to metrics.json after the final validation."""

    def findings(self) -> dict[str, Any]:
        """Plain JSON values, the same on a rerun with the same seed (no times)."""
        raise NotImplementedError
