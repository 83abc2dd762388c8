"""Weight-based circuits over training: at every validation, how strongly each head composes with the heads of
later layers (``composition/{q,k,v}/layer{a}/head{i}/layer{b}/head{j}``) and how much each head copies
(``circuit/copying/layer{l}/head{h}``), from the weights alone (:mod:`attention_lab.circuits`). Scalars like any
validation metric: curves in TensorBoard, values in metrics.json."""

from __future__ import annotations

import logging

import lightning as L

from attention_lab.circuits import circuit_scores, head_circuits

log = logging.getLogger(__name__)


class CircuitScores(L.Callback):
    """Logs the composition and copying scores at each validation; where the model's heads have no W_Q/W_K/W_V/W_O
    of the multihead shape, says so once and logs nothing."""

    def __init__(self) -> None:
        self.unsupported_noted = False

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        circuits = head_circuits(pl_module.model)
        if circuits is None:
            if not self.unsupported_noted:
                self.unsupported_noted = True
                log.info("circuit scores: not measured, the %s variant has no per-head W_Q/W_K/W_V/W_O of the "
                         "multihead shape", pl_module.config.name)
            return
        for name, value in circuit_scores(circuits).items():
            # the same on every process (the weights are): nothing to reduce
            pl_module.log(name, value, on_epoch=True, add_dataloader_idx=False)
