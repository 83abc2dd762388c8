"""Activation patching in every run whose task has a natural corruption: at the final validation (and, with
``every_validation``, at each one during training), each head's and each whole layer's clean output is patched
into the corrupted run on the validation set (:mod:`attention_lab.analysis.patching`). The fractions restored,
``patching/logit_diff/layer{l}/<head{h}|all>``, reach ``metrics.json``, the ``patching/logit_diff`` heatmap
(:class:`~attention_lab.callbacks.head_score_maps.HeadScoreMaps`) and the attention tab, as the head ablation's do
(:class:`~attention_lab.callbacks.head_ablation.HeadAblation`): :mod:`~attention_lab.callbacks.validation_pass`."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import lightning as L

from attention_lab.analysis.ablation import Batch
from attention_lab.callbacks.validation_pass import ValidationPass
from attention_lab.data.tasks import build_task

if TYPE_CHECKING:
    from attention_lab.analysis.patching import Patched


class ActivationPatching(ValidationPass):
    """``enabled``: the ``patching`` knob; ``task``: the run's task config (its name picks the corruption)."""

    what = "activation patching"  # the measurement, as its one line names it
    says_task = True  # whether its line also says when the task has no corruption (once a run is enough)

    def __init__(self, task: Mapping[str, Any], enabled: bool = True, every_validation: bool = False) -> None:
        super().__init__(every_validation)
        self.task = build_task(str(task["name"]))
        self.bos = bool(task.get("bos", False))  # the inputs open with <bos>: not part of the example to corrupt
        self.enabled = enabled
        self.skip_noted = False

    def active(self, pl_module: L.LightningModule) -> bool:
        """Whether there is something to patch; says why not once, in the subclass's module's log."""
        if not self.enabled:
            return False
        reason = self.model_reason(pl_module) if self.task.has_corruption() else \
            f"task={self.task.name} has no corruption to patch from"
        if reason is not None and not self.skip_noted and (self.says_task or self.task.has_corruption()):
            self.skip_noted = True
            logging.getLogger(type(self).__module__).info("%s: not measured, %s", self.what, reason)
        return reason is None

    def model_reason(self, pl_module: L.LightningModule) -> str | None:
        """Why the model cannot be patched, or None (the head ablation's rule for which layers count)."""
        # Imported by the runs whose task has a corruption: the others never patch.
        from attention_lab.analysis.patching import patched_layers

        return None if patched_layers(pl_module) else \
            f"the {pl_module.config.name} variant has no heads with weights of their own"

    def corrupted(self, batches: list[Batch]) -> list[Patched]:
        """The validation batches corrupted by the run's task: what every measurement of this family runs on."""
        from attention_lab.analysis.patching import corrupt_batch  # only once active(): see there

        return [corrupt_batch(self.task, batch, self.bos) for batch in batches]

    def measure(self, pl_module: L.LightningModule, batches: list[Batch]) -> dict[str, float]:
        from attention_lab.analysis.patching import patch_batches

        return patch_batches(pl_module, self.corrupted(batches))
