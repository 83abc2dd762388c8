"""Weight-based circuits over training: at every validation, how strongly each head composes with the heads of
later layers (``composition/{q,k,v}/layer{a}/head{i}/layer{b}/head{j}``) and how much each head copies
(``circuit/copying/layer{l}/head{h}``), from the weights alone (:mod:`attention_lab.analysis.circuits`). Scalars like any
validation metric: curves in TensorBoard, values in metrics.json. In a hybrid stack only the layers with per-head
W_Q/W_K/W_V/W_O of the multihead shape are scored; one line at the first validation names the others."""

from __future__ import annotations

import logging

import lightning as L

from attention_lab.analysis.circuits import (
    circuit_layers,
    circuit_scores,
    head_circuits,
    lacking_layers,
    unmeasured_reason,
)
from attention_lab.analysis.layer_memory import layer_list

log = logging.getLogger(__name__)


def coverage_note(model) -> str | None:
    """The line for a model whose layers are measured in part: which lack the matrices and which are measured;
    None where every layer or none is measured."""
    measured = circuit_layers(model)
    if not measured or len(measured) == len(model.blocks):
        return None
    return f"circuit scores: {lacking_layers(model)}; measured {layer_list(measured)}"


class CircuitScores(L.Callback):
    """Logs the composition and copying scores of the layers that have per-head W_Q/W_K/W_V/W_O of the multihead
    shape at each validation; says once which layers have none (and, where none has, logs nothing)."""

    def __init__(self) -> None:
        self.coverage_noted = False

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        model = pl_module.model
        circuits = head_circuits(model)
        if not self.coverage_noted:
            self.coverage_noted = True
            if circuits is None:
                log.info("circuit scores: not measured in any layer: %s", unmeasured_reason(model))
            elif (note := coverage_note(model)) is not None:
                log.info("%s", note)
        if circuits is None:
            return
        for name, value in circuit_scores(circuits).items():
            # the same on every process (the weights are): nothing to reduce
            pl_module.log(name, value, on_epoch=True, add_dataloader_idx=False)
