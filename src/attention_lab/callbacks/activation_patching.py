"""Activation patching in every run whose task has a natural corruption: at the final validation (and, with
``every_validation``, at each one during training), each head's and each whole layer's clean output is patched
into the corrupted run on the validation set (:mod:`attention_lab.analysis.patching`). The fractions restored,
``patching/logit_diff/layer{l}/<head{h}|all>``, reach ``metrics.json``, the ``patching/logit_diff`` heatmap
(:class:`~attention_lab.callbacks.head_score_maps.HeadScoreMaps`) and the attention tab, as the head ablation's do
(:class:`~attention_lab.callbacks.head_ablation.HeadAblation`): :mod:`~attention_lab.callbacks.validation_pass`."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import lightning as L

from attention_lab.analysis.ablation import Batch
from attention_lab.callbacks.validation_pass import ValidationPass
from attention_lab.data.tasks import build_task

log = logging.getLogger(__name__)


class ActivationPatching(ValidationPass):
    """``enabled``: the ``patching`` knob; ``task``: the run's task config (its name picks the corruption)."""

    def __init__(self, task: Mapping[str, Any], enabled: bool = True, every_validation: bool = False) -> None:
        super().__init__(every_validation)
        self.task = build_task(str(task["name"]))
        self.bos = bool(task.get("bos", False))  # the inputs open with <bos>: not part of the example to corrupt
        self.enabled = enabled
        self.skip_noted = False

    def active(self, pl_module: L.LightningModule) -> bool:
        """Whether there is something to patch; says why not once (the head ablation's rule for which layers
        count)."""
        if not self.enabled:
            return False
        if self.task.has_corruption():
            # Imported by the runs whose task has a corruption: the others never patch.
            from attention_lab.analysis.patching import patched_layers

            reason = None if patched_layers(pl_module) else \
                f"the {pl_module.config.name} variant has no heads with weights of their own"
        else:
            reason = f"task={self.task.name} has no corruption to patch from"
        if reason is not None and not self.skip_noted:
            self.skip_noted = True
            log.info("activation patching: not measured, %s", reason)
        return reason is None

    def measure(self, pl_module: L.LightningModule, batches: list[Batch]) -> dict[str, float]:
        from attention_lab.analysis.patching import patch_heads  # only once active(): see there

        return patch_heads(pl_module, batches, self.task, self.bos)
