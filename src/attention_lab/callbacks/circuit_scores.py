"""Weight-based circuits over training: at every validation, how strongly each head composes with the heads of
later layers (``composition/{q,k,v}/layer{a}/head{i}/layer{b}/head{j}``) and how much each head copies
(``circuit/copying/layer{l}/head{h}``), from the weights alone (:mod:`attention_lab.analysis.circuits`). Scalars like any
validation metric: curves in TensorBoard, values in metrics.json."""

from __future__ import annotations

import logging

import lightning as L

from attention_lab.analysis.circuits import circuit_scores, head_circuits, layers_with_head_circuits
from attention_lab.analysis.layer_memory import layer_list

log = logging.getLogger(__name__)

SHAPE = "per-head W_Q/W_K/W_V/W_O of the multihead shape"


def by_variant(layers: list[int], variants: list[str]) -> str:
    """``layer 0 (gated_deltanet)``, ``layers 0, 2 (mamba2) and layer 1 (conv)``: ``layers`` named with their
    variants."""
    groups: dict[str, list[int]] = {}
    for layer in layers:
        groups.setdefault(variants[layer], []).append(layer)
    return " and ".join(f"{layer_list(numbers)} ({variant})" for variant, numbers in groups.items())


def unmeasured_reason(model) -> str:
    """Why :func:`head_circuits` measures nothing for ``model`` (a SequenceModel): the layers that lack the matrices,
    and those that have them but are not scored either (the scores are computed for a stack whose every layer has
    them)."""
    variants = model.config.layer_variants()
    supported = layers_with_head_circuits(model)
    lacking = [layer for layer, has in enumerate(supported) if not has]
    having = [layer for layer, has in enumerate(supported) if has]
    if not lacking:  # every block has them: an encoder-decoder, whose encoder's heads are not scored
        return "an encoder-decoder's heads are not scored"
    if len(set(variants)) == 1:
        return f"the {variants[0]} variant has no {SHAPE}"
    reason = f"{by_variant(lacking, variants)} {'has' if len(lacking) == 1 else 'have'} no {SHAPE}"
    if having:
        reason += (f"; {by_variant(having, variants)} {'has' if len(having) == 1 else 'have'} them, but the scores "
                   "are computed only for a stack whose every layer has them")
    return reason


class CircuitScores(L.Callback):
    """Logs the composition and copying scores at each validation; where some layer's heads have no W_Q/W_K/W_V/W_O
    of the multihead shape, says once which layers (and that the others are not scored either) and logs nothing."""

    def __init__(self) -> None:
        self.unsupported_noted = False

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        circuits = head_circuits(pl_module.model)
        if circuits is None:
            if not self.unsupported_noted:
                self.unsupported_noted = True
                log.info("circuit scores: not measured in any layer: %s",
                         unmeasured_reason(pl_module.model))
            return
        for name, value in circuit_scores(circuits).items():
            # the same on every process (the weights are): nothing to reduce
            pl_module.log(name, value, on_epoch=True, add_dataloader_idx=False)
