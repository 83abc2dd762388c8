"""Section B's second reference: Lightning's own training loop on what ``scripts/train.py`` trains, and nothing else.

The LightningModule, datamodule, optimizer, batch size, gradient clipping and determinism of the composed config
(as benchmarks.plain_loop builds them), trained by a ``lightning.Trainer`` with no callbacks of the lab's, no
logger, no checkpoints, no progress bar and no validation: what any Lightning training of this model costs per
step. Between it and the plain loop lies Lightning's loop (its closure, hooks, batch transfer, result collection);
between the framework and it, what the lab adds (its callbacks, the logging of metrics and of the probe's
attention, the validations' bookkeeping).

    python -m benchmarks.lightning_floor '<json request>'    # what benchmarks.training starts
"""

from __future__ import annotations

import json
import sys
import time
import warnings
from typing import Any

import lightning as L

from benchmarks.compose import compose_train_config
from benchmarks.plain_loop import answer, window_result


class Window(L.Callback):
    """Wall and CPU seconds from the start of batch ``warmup_steps`` to the end of the last batch."""

    def __init__(self, warmup_steps: int) -> None:
        self.warmup_steps = warmup_steps
        self.started: tuple[float, float] | None = None
        self.ended: tuple[float, float] | None = None

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if trainer.global_step == self.warmup_steps:
            self.started = time.perf_counter(), time.process_time()

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self.ended = time.perf_counter(), time.process_time()


def lightning_floor(overrides: list[str], *, steps: int, warmup_steps: int, device: str = "cpu") -> dict[str, Any]:
    """Trains ``steps`` steps with a bare Trainer; times steps ``warmup_steps + 1`` to ``steps``."""
    from hydra.utils import instantiate

    cfg = compose_train_config(overrides)
    L.seed_everything(cfg.seed, workers=True, verbose=False)
    data = instantiate(cfg.data)
    data.setup("fit")
    module = instantiate(cfg.module, vocab=data.vocab.itos)
    window = Window(warmup_steps)
    trainer = L.Trainer(accelerator=device, devices=1, max_steps=steps, limit_val_batches=0, logger=False,
                        callbacks=[window], enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, gradient_clip_val=cfg.trainer.get("gradient_clip_val"),
                        deterministic=cfg.trainer.get("deterministic"), num_sanity_val_steps=0)
    with warnings.catch_warnings():  # "no validation", "few workers": by design here
        warnings.simplefilter("ignore")
        trainer.fit(module, datamodule=data)
    if window.started is None or window.ended is None:
        raise RuntimeError(f"the Trainer stopped at step {trainer.global_step}, before step {warmup_steps + 1}")
    train_s, train_cpu_s = (end - start for end, start in zip(window.ended, window.started, strict=True))
    return window_result("floor", steps, warmup_steps, train_s, train_cpu_s)


def main(request: dict[str, Any]) -> None:
    answer(request, lightning_floor)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m benchmarks.lightning_floor '<json request>'")
    main(json.loads(sys.argv[1]))
