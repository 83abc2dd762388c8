"""The last lines of a run on the console: why training stopped, and the commands that open this run next.

A run stops at ``max_steps`` (or ``max_epochs``), early when ``callbacks.early_stopping`` finds the task solved (the
rule of ``steps_to_solve``, :mod:`attention_lab.callbacks.steps_to_solve`) or a Lightning ``EarlyStopping`` of the
user's sees its monitored metric past its threshold, or on SIGINT/SIGTERM (see
:class:`attention_lab.callbacks.graceful_stop.GracefulStop`). Nothing else is printed along the way."""

from __future__ import annotations

import logging
import signal
from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import EarlyStopping
from lightning.pytorch.callbacks.early_stopping import EarlyStoppingReason

from attention_lab.callbacks.signals import StopSignals
from attention_lab.callbacks.steps_to_solve import StepsToSolve, StopWhenSolved
from attention_lab.data.probe import EXAMPLE_TEXT
from attention_lab.records.commands import shown_path, tensorboard_line, visualize_command

log = logging.getLogger(__name__)


def early_stop_reason(callback: EarlyStopping, trainer: L.Trainer) -> str | None:
    """Why ``callback`` stopped training, or None when it did not."""
    reason = callback.stopping_reason
    if reason == EarlyStoppingReason.NOT_STOPPED:
        return None
    value = trainer.callback_metrics.get(callback.monitor)
    shown = f"{float(value):.4f}" if value is not None else "?"
    step = trainer.global_step
    relation = ">" if callback.mode == "max" else "<"
    if reason == EarlyStoppingReason.STOPPING_THRESHOLD:
        return f"early stopping at step {step}: {callback.monitor} = {shown} {relation} {callback.stopping_threshold}"
    if reason == EarlyStoppingReason.DIVERGENCE_THRESHOLD:
        return (f"early stopping at step {step}: {callback.monitor} = {shown} past the divergence threshold "
                f"{callback.divergence_threshold}")
    if reason == EarlyStoppingReason.PATIENCE_EXHAUSTED:
        return (f"early stopping at step {step}: {callback.monitor} did not improve in {callback.wait_count} "
                f"validations (best {float(callback.best_score):.4f})")
    return f"early stopping at step {step}: {callback.monitor} = {shown} is not finite"


def trained_past_solving(trainer: L.Trainer) -> str:
    """Why a solved run went on to its step limit, or "": without the stop when solved (an experiment that watches
    training go on past it, e.g. experiment=induction_formation, or ``callbacks.early_stopping=null``), a run that
    prints a ``steps_to_solve`` and then ``max_steps=... reached`` would read as breaking the rule that a run stops
    where it is solved."""
    if any(isinstance(callback, StopWhenSolved) for callback in trainer.callbacks):
        return ""
    solved = next((callback.step for callback in trainer.callbacks if isinstance(callback, StepsToSolve)), None)
    if solved is None:
        return ""
    return (f" (solved at step {solved}; this run trains past solving: its stop when solved, "
            "callbacks.early_stopping, is off)")


class RunEndNote(L.Callback):
    """Says why the run stopped and what to run next; ``note()`` is the closing block (train.py prints it after
    the final metrics), an interruption is said at once (the process ends with it)."""

    def __init__(self, stop: StopSignals, run_dir: Path, example: str = EXAMPLE_TEXT) -> None:
        self.stop, self.run_dir = stop, run_dir
        self.example = example  # the sentence the visualize.py command runs (data.probe.example_text)
        self.reason: str | None = None

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        for callback in trainer.callbacks:
            if isinstance(callback, StopWhenSolved) and callback.reason:
                self.reason = callback.reason
                return
            if isinstance(callback, EarlyStopping) and (reason := early_stop_reason(callback, trainer)):
                self.reason = reason
                return
        step = trainer.global_step
        if trainer.max_steps > 0 and step >= trainer.max_steps:
            self.reason = f"max_steps={trainer.max_steps} reached{trained_past_solving(trainer)}"
        else:
            self.reason = f"max_epochs={trainer.max_epochs} reached at step {step}{trained_past_solving(trainer)}"

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        if self.stop.signum is not None:
            signum = self.stop.signum
        elif isinstance(exception, KeyboardInterrupt):
            signum = signal.SIGINT
        else:
            return  # a failure: the run's error line says what happened
        self.reason = f"interrupted by {signal.Signals(signum).name} at step {trainer.global_step}"
        if trainer.is_global_zero:
            log.warning(self.note())

    def note(self) -> str:
        run_dir = shown_path(self.run_dir)
        return (f"stopped: {self.reason or 'unknown'}\n"
                f"next: {tensorboard_line(run_dir)}\n"
                f"      {visualize_command(run_dir, self.example)}")
