"""Path patching as a measurement of the run (``path_patching=true``): at the final validation, for every sender head,
the share of the logit difference carried by each path from it into a later head's query, key or value input and
into the logits (:mod:`attention_lab.analysis.path_patching`), on the corrupted batches activation patching uses.
The values, ``path_patching/logit_diff/layer{a}/head{i}/layer{b}/head{j}/{q,k,v}`` and ``.../logits``, reach
``metrics.json``, the ``path_patching/logit_diff`` heatmap
(:class:`~attention_lab.callbacks.head_score_maps.HeadScoreMaps`) and the attention tab, as the patching's do.

Which runs are measured is activation patching's rule (the task has a corruption) with the model's condition of
path patching's own (:func:`~attention_lab.analysis.path_patching.unsupported`): a subclass of
:class:`~attention_lab.callbacks.activation_patching.ActivationPatching`. Measured once, at the end only: with
heads × (3 × the later heads + 1) cases, a pass at every validation would cost many times the training."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import lightning as L

from attention_lab.analysis.ablation import Batch
from attention_lab.callbacks.activation_patching import ActivationPatching

log = logging.getLogger(__name__)


class PathPatching(ActivationPatching):
    """``enabled``: the ``path_patching`` knob; ``task``: the run's task config (its name picks the corruption)."""

    what = "path patching"

    def __init__(self, task: Mapping[str, Any], enabled: bool = False) -> None:
        super().__init__(task, enabled, every_validation=False)

    def model_reason(self, pl_module: L.LightningModule) -> str | None:
        # Imported by the runs whose task has a corruption (as the patching's): the others never patch.
        from attention_lab.analysis.path_patching import unsupported

        return unsupported(pl_module)

    def measure(self, pl_module: L.LightningModule, batches: list[Batch]) -> dict[str, float]:
        """Every head of every layer as the sender, into every receiver :func:`path_patch` takes; a sender it
        refuses (a layer that cannot send) is left out, and the reasons said once."""
        from attention_lab.analysis.path_patching import PathPatchingError, path_patch

        patched = self.corrupted(batches)
        values: dict[str, float] = {}
        skipped: dict[str, None] = {}  # each reason once, in the order met
        for layer, block in enumerate(pl_module.model.blocks):
            for head in range(block.attention.num_heads):
                try:
                    values.update(path_patch(pl_module, patched, (layer, head)))
                except PathPatchingError as refused:
                    skipped[refused.why] = None
        if skipped and not self.skip_noted:
            self.skip_noted = True
            log.info("path patching: some senders not measured, %s", "; ".join(skipped))
        return values
