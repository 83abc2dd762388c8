"""The attention modules' own numbers (:meth:`~attention_lab.attention.base.AttentionModule.logged_values`: gated's
mean gate per head), logged at each validation under the variant's name and the layer:
``<variant>/<name>/layer<l>[/<rest>]`` for a value named ``<name>[/<rest>]`` (``gated/gate/layer0/head1``)."""

from __future__ import annotations

import lightning as L

from attention_lab.attention import ATTENTION_REGISTRY


def layer_tag(variant: str, layer: int, name: str) -> str:
    """``gated``, 0, ``gate/head1`` -> ``gated/gate/layer0/head1``; ``diff``, 2, ``lambda`` -> ``diff/lambda/layer2``."""
    first, _, rest = name.partition("/")
    return "/".join(part for part in (variant, first, f"layer{layer}", rest) if part)


class ModuleValues(L.Callback):
    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        values: dict[str, float] = {}
        for layer, block in enumerate(pl_module.model.blocks):
            attention = block.attention
            variant = ATTENTION_REGISTRY.name_of(type(attention)) or type(attention).__name__
            for name, value in attention.logged_values().items():
                values[layer_tag(variant, layer, name)] = value
        if values:
            for logger in trainer.loggers:
                logger.log_metrics(values, step=trainer.global_step)
