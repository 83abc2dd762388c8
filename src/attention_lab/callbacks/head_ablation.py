"""Head ablation in every run: at the final validation (and, with ``every_validation``, at each one during
training), each head of each layer and each whole layer is switched off in turn on the validation set
(:mod:`attention_lab.ablation`). The changes reach ``metrics.json`` (and so ``optimized_metric`` and
``compare.py``), the ``ablation/<how>/<metric>`` heatmaps
(:class:`~attention_lab.callbacks.head_score_maps.HeadScoreMaps`) and the attention tab.

Measured at every validation, they are curves in TensorBoard's scalars, like any validation metric. Measured once,
at the end (the default), they are not: one point per head and layer would be a chart of one dot each, dozens of
them. They go to the attention tab as its own scalars
(:func:`~attention_lab.tensorboard_plugin.summary.end_values_summary`)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import lightning as L
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from tensorboard.compat.proto import event_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from attention_lab.ablation import ablate_heads
from attention_lab.callbacks.run_record import RunRecord
from attention_lab.head_metrics import ABLATIONS
from attention_lab.tensorboard_plugin.summary import end_values_summary


@rank_zero_only
def write_end_values(trainer: L.Trainer, values: dict[str, float]) -> None:
    """``values`` at the trainer's step, in an event file of their own in the run's TensorBoard dir."""
    log_dir = next((logger.log_dir for logger in trainer.loggers if isinstance(logger, TensorBoardLogger)), None)
    if log_dir is None or not values:
        return
    writer = EventFileWriter(log_dir, filename_suffix=".ablation")
    try:
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=trainer.global_step,
                                         summary=end_values_summary(values)))
    finally:
        writer.close()


class HeadAblation(RunRecord):
    """``hows``: the ablations (``zero``, ``mean``); None = all of them where the heads have weights of their own
    (``ModelConfig.learned_heads``), none elsewhere."""

    def __init__(self, hows: Sequence[str] | None = None, every_validation: bool = False) -> None:
        self.hows = None if hows is None else tuple(hows)
        self.every_validation = every_validation
        self.names: list[str] = []  # the metrics of the last ablation pass
        self.final: dict[str, float] = {}  # their values at the final validation (reduced over the processes)

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        hows = self.hows if self.hows is not None else (ABLATIONS if pl_module.config.learned_heads else ())
        if not hows or trainer.sanity_checking:
            return
        if trainer.state.fn == "fit" and not self.every_validation:
            return
        loaders = trainer.val_dataloaders
        loader = loaders[0] if isinstance(loaders, (list, tuple)) else loaders  # the validation set, not ood
        if loader is None:
            return
        batches = [tuple(t.to(pl_module.device) for t in batch) for batch in loader]
        results = ablate_heads(pl_module, batches, hows)
        self.names = list(results)
        for name, value in results.items():
            # In the callback metrics either way (the heatmaps read them there); in the loggers as curves only.
            pl_module.log(name, value, on_epoch=True, sync_dist=True, add_dataloader_idx=False,
                          logger=self.every_validation)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn == "fit" or not self.names:
            return
        metrics = trainer.callback_metrics
        self.final = {name: float(metrics[name]) for name in self.names if name in metrics}
        if not self.every_validation:
            write_end_values(trainer, self.final)

    def record(self) -> dict[str, Any]:
        return dict(self.final)
