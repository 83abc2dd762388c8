"""TensorBoard's Custom Scalars tab: loss and accuracies first, each on one chart with its training, validation
and (when set) longer-input curves. The Scalars tab sorts its sections by name, so `attention_entropy/*` comes
before `train/*`; this layout is the one place where a run opens on what it learned."""

from __future__ import annotations

import re

import lightning as L
from lightning.pytorch.loggers import TensorBoardLogger

# The charts, by the metric behind them; each chart's tags are whole-tag patterns (the tab reads them as regexes).
CHARTS = {"loss": "loss", "sequence accuracy": "seq_acc", "token accuracy": "token_acc"}
SPLITS = ("train", "val", "ood")
CATEGORY = "loss and accuracy"


def layout() -> dict[str, dict[str, list]]:
    """``SummaryWriter.add_custom_scalars``'s layout: {category: {chart: ["Multiline", [tag regexes]]}}."""
    return {CATEGORY: {title: ["Multiline", [f"^{re.escape(f'{split}/{metric}')}$" for split in SPLITS]]
                       for title, metric in CHARTS.items()}}


class ScalarsLayout(L.Callback):
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        for logger in trainer.loggers:
            if isinstance(logger, TensorBoardLogger):  # a resumed run writes it again: TensorBoard merges the same
                logger.experiment.add_custom_scalars(layout())
