"""Head ablation in every run: at the final validation (and, with ``every_validation``, at each one during
training), each head of each layer and each whole layer is switched off in turn on the validation set
(:mod:`attention_lab.analysis.ablation`); where the values go: :mod:`~attention_lab.callbacks.validation_pass`."""

from __future__ import annotations

from collections.abc import Sequence

import lightning as L

from attention_lab.analysis.ablation import Batch, ablate_heads
from attention_lab.analysis.tags import ABLATIONS
from attention_lab.callbacks.validation_pass import ValidationPass


class HeadAblation(ValidationPass):
    """``hows``: the ablations (``zero``, ``mean``); None = all of them where the heads have weights of their own
    (``ModelConfig.learned_heads``), none elsewhere."""

    def __init__(self, hows: Sequence[str] | None = None, every_validation: bool = False) -> None:
        super().__init__(every_validation)
        self.hows = None if hows is None else tuple(hows)

    def chosen(self, pl_module: L.LightningModule) -> tuple[str, ...]:
        return self.hows if self.hows is not None else (ABLATIONS if pl_module.config.learned_heads else ())

    def active(self, pl_module: L.LightningModule) -> bool:
        return bool(self.chosen(pl_module))

    def measure(self, pl_module: L.LightningModule, batches: list[Batch]) -> dict[str, float]:
        return ablate_heads(pl_module, batches, self.chosen(pl_module))
