"""Activation patching in every run whose task has a natural corruption: at the final validation (and, with
``every_validation``, at each one during training), each head's and each whole layer's clean output is patched
into the corrupted run on the validation set (:mod:`attention_lab.patching`). The fractions restored,
``patching/logit_diff/layer{l}/<head{h}|all>``, reach ``metrics.json``, the ``patching/logit_diff`` heatmap
(:class:`~attention_lab.callbacks.head_score_maps.HeadScoreMaps`) and the attention tab, as the head ablation's do
(:class:`~attention_lab.callbacks.head_ablation.HeadAblation`)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import lightning as L

from attention_lab.callbacks.head_ablation import write_end_values
from attention_lab.callbacks.run_record import RunRecord
from attention_lab.data.tasks import build_task
from attention_lab.patching import patch_heads, patched_layers

log = logging.getLogger(__name__)


class ActivationPatching(RunRecord):
    """``enabled``: the ``patching`` knob; ``task``: the run's task config (its name picks the corruption)."""

    def __init__(self, task: Mapping[str, Any], enabled: bool = True, every_validation: bool = False) -> None:
        self.task = build_task(str(task["name"]))
        self.bos = bool(task.get("bos", False))  # the inputs open with <bos>: not part of the example to corrupt
        self.enabled = enabled
        self.every_validation = every_validation
        self.names: list[str] = []  # the metrics of the last patching pass
        self.final: dict[str, float] = {}  # their values at the final validation (reduced over the processes)
        self.skip_noted = False

    def skipped(self, pl_module: L.LightningModule) -> bool:
        """Whether there is nothing to patch; says why once (the head ablation's rule for which layers count)."""
        if not self.enabled:
            return True
        reason = (f"task={self.task.name} has no corruption to patch from" if not self.task.has_corruption() else
                  None if patched_layers(pl_module) else
                  f"the {pl_module.config.name} variant has no heads with weights of their own")
        if reason is not None and not self.skip_noted:
            self.skip_noted = True
            log.info("activation patching: not measured, %s", reason)
        return reason is not None

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or (trainer.state.fn == "fit" and not self.every_validation):
            return
        if self.skipped(pl_module):
            return
        loaders = trainer.val_dataloaders
        loader = loaders[0] if isinstance(loaders, (list, tuple)) else loaders  # the validation set, not ood
        if loader is None:
            return
        batches = [tuple(t.to(pl_module.device) for t in batch) for batch in loader]
        results = patch_heads(pl_module, batches, self.task, self.bos)
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
