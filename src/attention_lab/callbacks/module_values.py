"""Per-module values a variant wants on TensorBoard during training (diff's λ per layer, a gate's mean): one
callback for all of them. A module offers them by defining ``logged_values() -> {tag: float}``; the callback logs
every such module's values at each training step through Lightning's own ``log_dict`` (kept at the trainer's
``log_every_n_steps``), so a variant that wants something logged declares it and no code here names a variant."""

from __future__ import annotations

import lightning as L
import torch


def module_values(model: torch.nn.Module) -> dict[str, float]:
    """Every ``logged_values()`` of ``model``'s modules, merged: {tag: value}."""
    values: dict[str, float] = {}
    for module in model.modules():
        offer = getattr(type(module), "logged_values", None)
        if callable(offer):
            values.update(offer(module))
    return values


class ModuleValues(L.Callback):
    """Logs what the model's modules offer through ``logged_values()``; nothing for a model whose modules offer none."""

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        values = module_values(pl_module)
        if values:
            pl_module.log_dict(values, on_step=True, on_epoch=False)
