"""Rich's progress bar, on a terminal only, and without ``v_num``.

- ``v_num``: the TensorBoard version is the run's name here (``model=multihead,heads=3``), already in the run dir and
  the console, and too long for the bar. Lightning's documented way: override ``get_metrics``.
- Not on a file or a pipe: where the console is not a terminal (``python scripts/train.py > log``, a sweep job's
  or a SLURM job's log), Rich cannot redraw the bar in place and prints each bar's last frame instead, wrapped into
  fragments between the log lines (``Epoch 0/0 ━━━━ 60/63 ... val/loss:`` and a column of numbers). There the bar
  is off (Lightning's ``disable``); the log lines say where the run is. Rich decides what a terminal is
  (``Console.is_terminal``: the stream's ``isatty``, and ``TTY_COMPATIBLE`` / ``FORCE_COLOR`` where set), with the
  bar's own ``console_kwargs``."""

from __future__ import annotations

from typing import Any

import lightning as L
from lightning.pytorch.callbacks import RichProgressBar
from rich.console import Console


class ProgressBar(RichProgressBar):
    def __init__(self, *args: Any, console_kwargs: dict[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, console_kwargs=console_kwargs, **kwargs)
        self.console_settings = dict(console_kwargs or {})  # what the bar's console is built with

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        console = Console(**self.console_settings)  # decided as the run starts: where it writes now
        if not (console.is_terminal or console.is_jupyter):  # a notebook draws the bar as a widget
            self.disable()

    def get_metrics(self, trainer: L.Trainer, pl_module: L.LightningModule) -> dict[str, Any]:
        items = super().get_metrics(trainer, pl_module)
        items.pop("v_num", None)
        return items
