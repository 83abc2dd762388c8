"""Attribution patching at every validation of a run whose task has a corruption (``attribution=true``): every head's
activation patching estimated to first order, two forward passes and one backward pass for all heads at once
(:mod:`attention_lab.analysis.attribution`), logged as ``attribution/logit_diff/layer{l}/head{h}``: curves in
TensorBoard's scalars, the final validation's values in metrics.json, the ``attribution/logit_diff`` heatmap
(:class:`~attention_lab.callbacks.head_score_maps.HeadScoreMaps`) and the attention tab. Which runs are measured,
and on which corrupted batches, is activation patching's rule: a subclass of
:class:`~attention_lab.callbacks.activation_patching.ActivationPatching`.

On all of the validation set at the final validation, and at every one where activation patching is measured too
(``patching_every_validation``): the patching's batches, so that the two compare head for head. At the validations
during training otherwise, on its first :data:`EXAMPLES` examples only: all of it would cost about three plain validation
passes each time, a tenth of a default-length run (docs/benchmarks.md, "Attribution patching (C)").

``attribution/rank_corr``: at each validation where both were measured, Spearman's rank correlation of the estimate
with activation patching over the heads (:func:`~attention_lab.analysis.attribution.rank_correlation`), from the
values measured. Computed by whichever of the two measures second in ``on_validation_epoch_end``
(:meth:`~attention_lab.callbacks.validation_pass.ValidationPass.after_pass`), so the callbacks' order does not
matter. Below :data:`AGREEMENT` at the final validation, one line says that the estimate is not to be trusted on
this model.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from typing import Any

import lightning as L
import torch

from attention_lab.analysis.ablation import Batch
from attention_lab.analysis.tags import ATTRIBUTION, PATCHING, HeadMetric, layer_head
from attention_lab.callbacks.activation_patching import ActivationPatching
from attention_lab.callbacks.validation_pass import ValidationPass, validation_of

log = logging.getLogger(__name__)

EXAMPLES = 64  # examples of the validation set at a validation where activation patching is not measured
AGREEMENT = 0.5  # a rank correlation below this at the final validation is said (also NaN: no ranking to compare)
RANK_CORR = "attribution/rank_corr"


def first_examples(batches: list[Batch], count: int) -> list[Batch]:
    """The first ``count`` rows of ``batches``, in order (the validation loader does not shuffle)."""
    kept: list[Batch] = []
    for batch in batches:
        if count <= 0:
            break
        kept.append(tuple(t[:count] for t in batch))
        count -= len(batch[0])
    return kept


def by_head(values: Mapping[str, float], family: str) -> dict[str, float]:
    """``layer{l}/head{h}`` -> value, of the per-head values of ``family`` in ``values`` (whole layers left out): two
    families keyed alike, for :func:`~attention_lab.analysis.attribution.rank_correlation`."""
    found = {}
    for name, value in values.items():
        record = HeadMetric.parse(name)
        if record is not None and record.family == family and record.head is not None:
            found[layer_head(record.layer, record.head)] = float(value)
    return found


def disagreement(value: float) -> str | None:
    """The line for a final rank correlation below AGREEMENT (or NaN: nothing to rank), else None."""
    if value >= AGREEMENT:
        return None
    if math.isnan(value):
        return ("attribution patching: no rank correlation with activation patching at the final validation (fewer "
                "than two heads with a number on both sides, or one side ranks them all alike): the first-order "
                f"estimate is unchecked on this model; read {PATCHING}, not {ATTRIBUTION}")
    return (f"attribution patching: rank correlation {value:.2f} with activation patching at the final validation "
            f"(below {AGREEMENT}): the first-order estimate disagrees with patching on this model, likely because "
            "a later attention's softmax saturates (its gradient ~0 where a large change flips the attention); "
            f"read {PATCHING}, not {ATTRIBUTION}")


class AttributionPatching(ActivationPatching):
    """``enabled``: the ``attribution`` knob; ``task``: the run's task config; ``all_examples``: all of the
    validation set at every validation (where activation patching is at every one: the same batches each time)."""

    what = "attribution patching"
    # A task without a corruption: activation patching's line says so at the end, one line for both (the default
    # run's console); a model it cannot measure is still said here.
    says_task = False

    def __init__(self, task: Mapping[str, Any], enabled: bool = True, all_examples: bool = False) -> None:
        super().__init__(task, enabled, every_validation=True)
        self.all_examples = all_examples

    def measure(self, pl_module: L.LightningModule, batches: list[Batch]) -> dict[str, float]:
        from attention_lab.analysis.attribution import attribute_batches  # only once active(): see there

        if pl_module.trainer.state.fn == "fit" and not self.all_examples:
            batches = first_examples(batches, EXAMPLES)
        # Lightning validates in inference mode, where no gradient can be taken, and the loader's tensors made there
        # cannot enter a backward pass: out of it, on copies.
        with torch.inference_mode(False):
            return attribute_batches(pl_module, self.corrupted([tuple(t.clone() for t in b) for b in batches]))

    def after_pass(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        """Once this pass and an activation patching have both measured in this validation (whichever first): the
        rank correlation of the two over the heads, logged there (a curve where the patching is at every
        validation)."""
        now = validation_of(trainer)
        if self.measured_at != now or RANK_CORR in self.names:
            return
        exact = by_head({name: value for callback in trainer.callbacks
                         if isinstance(callback, ValidationPass) and callback.measured_at == now
                         for name, value in callback.values.items()}, PATCHING)
        if not exact:
            return
        from attention_lab.analysis.attribution import rank_correlation

        value = rank_correlation(by_head(self.values, ATTRIBUTION), exact)
        self.names.append(RANK_CORR)  # in the final values (on_validation_end) with the heads'
        pl_module.log(RANK_CORR, value, on_epoch=True, sync_dist=True, add_dataloader_idx=False)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_validation_end(trainer, pl_module)
        if RANK_CORR in self.final and (line := disagreement(self.final[RANK_CORR])) is not None:
            log.info("%s", line)
