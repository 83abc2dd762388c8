"""TensorBoard's Custom Scalars tab: loss and accuracies, each on one chart with its training, validation and (when
set) longer-input curves (the Scalars and Time Series dashboards show them first too, each split on a card of its
own: :mod:`attention_lab.tensorboard_logger`)."""

from __future__ import annotations

import re

import lightning as L
from lightning.pytorch.loggers import TensorBoardLogger

from attention_lab.tensorboard_logger import CURVES, SPLITS, tensorboard_tag

# The charts, by the metric behind them; each chart's tags are whole-tag patterns (the tab reads them as regexes).
CHARTS = dict(zip(("loss", "sequence accuracy", "token accuracy"), CURVES, strict=True))
CATEGORY = "loss and accuracy"


def layout() -> dict[str, dict[str, list]]:
    """``SummaryWriter.add_custom_scalars``'s layout: {category: {chart: ["Multiline", [tag regexes]]}}."""
    return {CATEGORY: {title: ["Multiline", [f"^{re.escape(tensorboard_tag(f'{split}/{metric}'))}$" for split in SPLITS]]
                       for title, metric in CHARTS.items()}}


class ScalarsLayout(L.Callback):
    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.is_global_zero:
            return
        for logger in trainer.loggers:
            if isinstance(logger, TensorBoardLogger):  # a resumed run writes it again: TensorBoard merges the same
                logger.experiment.add_custom_scalars(layout())
