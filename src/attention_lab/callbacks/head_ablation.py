"""Head ablation in every run: at the final validation (and, with ``every_validation``, at each one during
training), each head of each layer and each whole layer is switched off in turn on the validation set
(:mod:`attention_lab.ablation`). The changes are logged like any validation metric, so they reach TensorBoard's
scalars, ``metrics.json``, ``optimized_metric`` and the ``ablation/<how>/<metric>`` heatmaps
(:class:`~attention_lab.callbacks.head_score_maps.HeadScoreMaps`)."""

from __future__ import annotations

from collections.abc import Sequence

import lightning as L

from attention_lab.ablation import ablate_heads
from attention_lab.head_metrics import ABLATIONS


class HeadAblation(L.Callback):
    """``hows``: the ablations (``zero``, ``mean``); None = all of them where the heads have weights of their own
    (``ModelConfig.learned_heads``), none elsewhere."""

    def __init__(self, hows: Sequence[str] | None = None, every_validation: bool = False) -> None:
        self.hows = None if hows is None else tuple(hows)
        self.every_validation = every_validation

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
        for name, value in ablate_heads(pl_module, batches, hows).items():
            pl_module.log(name, value, on_epoch=True, sync_dist=True, add_dataloader_idx=False)
