"""The lifecycle of a training run: how it starts and stops, what it checkpoints, its random state, and what it
says at its end. Each callback here keeps the run itself sound: a stop on SIGINT/SIGTERM or at a non-finite loss,
``last.ckpt`` always the newest model, checkpoints that survive a moved run dir and carry the random state, a
progress bar only where one can be drawn, and the closing note.

They are kept apart from the measurement callbacks (the probe's logging, the head scores, the ablation and
patching passes): those observe a run and may be switched off (``~callbacks.<name>``) without changing what it
trains, while these decide when it stops and what it leaves behind, and train.py adds most of them itself."""

from __future__ import annotations

import logging
import random
import signal
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint, RichProgressBar
from lightning.pytorch.callbacks.early_stopping import EarlyStoppingReason
from lightning.pytorch.trainer.states import TrainerFn
from rich.console import Console

from attention_lab.callbacks.signals import StopNow, StopSignals
from attention_lab.callbacks.steps_to_solve import StepsToSolve, StopWhenSolved
from attention_lab.data.probe import EXAMPLE_TEXT
from attention_lab.errors import TrainingDiverged, TrainingInterrupted
from attention_lab.records.checkpoints import last_checkpoint_path
from attention_lab.records.commands import shown_path, tensorboard_line, visualize_command

log = logging.getLogger(__name__)

PATH_KEYS = ("best_model_path", "kth_best_model_path", "last_model_path")  # RunDirModelCheckpoint's paths


class GracefulStop(L.Callback):
    """After SIGINT/SIGTERM (see :class:`attention_lab.callbacks.signals.StopSignals`): save ``checkpoints/last.ckpt``
    at the end of the current step and stop; ``python scripts/train.py resume=<run dir>`` continues the run."""

    def __init__(self, stop: StopSignals) -> None:
        self.stop = stop
        self.saved: Path | None = None

    def save(self, trainer: L.Trainer) -> Path | None:
        if trainer.global_step == 0:
            return None  # nothing trained yet: nothing new to save
        path = last_checkpoint_path(trainer)
        trainer.save_checkpoint(path, weights_only=False)  # full state; atomic: AtomicCheckpointIO
        log.warning("checkpoint of step %d saved to %s", trainer.global_step, path)
        self.saved = path
        return path

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.stop.signum is not None:  # the signal came during setup
            raise TrainingInterrupted(self.stop.signum, trainer.global_step, None)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        if self.stop.signum is not None:
            raise TrainingInterrupted(self.stop.signum, trainer.global_step, self.save(trainer))

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        """Lightning ends fit by itself on SIGTERM during validation (SIGTERMException) and on Ctrl-C: when
        that was our stop, save the step reached, as at the end of a step. Not after a second Ctrl-C."""
        stopped_here = isinstance(exception, (TrainingInterrupted, StopNow, KeyboardInterrupt))
        if self.stop.signum is not None and not stopped_here and trainer.state.fn == "fit" and self.saved is None:
            self.save(trainer)


class StopOnNonFiniteLoss(L.Callback):
    """Stop at the first nan/inf training loss, before backward() and the optimizer step: the weights in memory
    and in every checkpoint stay finite, and last.ckpt is left as it was."""

    def __init__(self) -> None:
        self.checkpoint_step: int | None = None  # the step of the newest checkpoint saved or loaded

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        self.checkpoint_step = int(checkpoint.get("global_step", trainer.global_step))

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict[str, Any]) -> None:
        self.checkpoint_step = int(checkpoint.get("global_step", 0))

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        if bool(torch.isfinite(loss).all()):
            return
        path = last_checkpoint_path(trainer)
        saved = path.is_file()
        raise TrainingDiverged(float(loss.detach().float().mean()), trainer.global_step, path if saved else None,
                               self.checkpoint_step if saved else None)


class LastCheckpoint(L.Callback):
    """``checkpoints/last.ckpt`` always holds the newest model: after every validation during training and at its
    end.

    ModelCheckpoint's ``save_last=True`` writes last.ckpt only when it also writes a top-k checkpoint, that is when
    ``best.ckpt`` improves: a run solved at step 250 and trained to 300 would keep step 250 in both files, so the
    review tools would show another model than the one metrics.json describes, and a resume would train the gap
    again."""

    def __init__(self) -> None:
        self.saved_step: int | None = None

    def save(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        if (trainer.state.fn != TrainerFn.FITTING or trainer.sanity_checking or trainer.fast_dev_run
                or trainer.global_step == 0 or trainer.global_step == self.saved_step):
            return
        if not all(bool(torch.isfinite(p).all()) for p in module.parameters()):
            return  # diverging: every checkpoint stays finite, and the next loss stops the run (StopOnNonFiniteLoss)
        trainer.save_checkpoint(last_checkpoint_path(trainer), weights_only=False)  # full state; atomic: AtomicCheckpointIO
        self.saved_step = trainer.global_step

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.save(trainer, pl_module)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.save(trainer, pl_module)


class RunDirModelCheckpoint(ModelCheckpoint):
    """ModelCheckpoint for a run dir that may be moved or copied: the paths it keeps in its state are read as
    names inside the run's checkpoints folder, so a resumed run keeps its best score and its files."""

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if self.dirpath is None or not state_dict.get("dirpath"):
            super().load_state_dict(state_dict)
            return
        here = Path(self.dirpath)

        def moved(path: Any) -> Any:  # <old dir>/best.ckpt -> <this dir>/best.ckpt
            return str(here / Path(path).name) if path else path

        state = dict(state_dict, dirpath=self.dirpath, **{key: moved(state_dict.get(key)) for key in PATH_KEYS})
        state["best_k_models"] = {moved(path): score for path, score in state_dict.get("best_k_models", {}).items()}
        super().load_state_dict(state)


class RngState(L.Callback):
    """The global random states (torch, Python, NumPy) in every checkpoint, restored on resume: dropout masks
    after a resume are those of the uninterrupted run. Stored as tensors and plain types only, so the
    checkpoint loads with ``weights_only=True``."""

    def state_dict(self) -> dict[str, Any]:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        return {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "python": list(random.getstate()[1]),
            "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": int(pos),
                      "has_gauss": int(has_gauss), "cached": float(cached)},
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if not state_dict:
            return
        torch.set_rng_state(state_dict["torch"])
        if state_dict.get("cuda") and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(state_dict["cuda"])
        random.setstate((3, tuple(state_dict["python"]), None))
        n = state_dict["numpy"]
        np.random.set_state((n["kind"], n["keys"].numpy().astype(np.uint32), n["pos"], n["has_gauss"], n["cached"]))


class ProgressBar(RichProgressBar):
    """Rich's progress bar, on a terminal only, and without ``v_num``.

    - ``v_num``: the TensorBoard version is the run's name here (``model=multihead,heads=3``), already in the run dir
      and the console, and too long for the bar. Lightning's documented way: override ``get_metrics``.
    - Not on a file or a pipe: where the console is not a terminal (``python scripts/train.py > log``, a sweep job's
      or a SLURM job's log), Rich cannot redraw the bar in place and prints each bar's last frame instead, wrapped
      into fragments between the log lines (``Epoch 0/0 ━━━━ 60/63 ... val/loss:`` and a column of numbers). There
      the bar is off (Lightning's ``disable``); the log lines say where the run is. Rich decides what a terminal is
      (``Console.is_terminal``: the stream's ``isatty``, and ``TTY_COMPATIBLE`` / ``FORCE_COLOR`` where set), with
      the bar's own ``console_kwargs``."""

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
    """The last lines of a run on the console: why training stopped, and the commands that open this run next.

    A run stops at ``max_steps`` (or ``max_epochs``), early when ``callbacks.early_stopping`` finds the task solved
    (the rule of ``steps_to_solve``, :mod:`attention_lab.callbacks.steps_to_solve`) or a Lightning ``EarlyStopping``
    of the user's sees its monitored metric past its threshold, or on SIGINT/SIGTERM (see :class:`GracefulStop`).
    Nothing else is printed along the way.

    Says why the run stopped and what to run next; ``note()`` is the closing block (train.py prints it after
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
