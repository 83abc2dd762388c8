"""Rich's progress bar without ``v_num``: the TensorBoard version is the run's name here
(``model=multihead,heads=3``), already in the run dir and the console, and too long for the bar. Lightning's
documented way: override ``get_metrics``."""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import RichProgressBar


class ProgressBar(RichProgressBar):
    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        items = super().get_metrics(trainer, pl_module)
        items.pop("v_num", None)
        return items
