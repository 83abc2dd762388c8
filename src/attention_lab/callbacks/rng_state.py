"""The global random states (torch, Python, NumPy) in every checkpoint, restored on resume: dropout masks
after a resume are those of the uninterrupted run. Stored as tensors and plain types only, so the
checkpoint loads with ``weights_only=True``."""

from __future__ import annotations

import random
from typing import Any

import lightning as L
import numpy as np
import torch


class RngState(L.Callback):
    def state_dict(self) -> dict[str, Any]:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        return {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "python": list(random.getstate()[1]),
            "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                      "has_gauss": int(has_gauss), "cached": float(cached)},
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not state_dict:
            return
        torch.set_rng_state(state_dict["torch"])
        if state_dict.get("cuda") and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state_dict["cuda"])
        random.setstate((3, tuple(state_dict["python"]), None))
        n = state_dict["numpy"]
        np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"]))
