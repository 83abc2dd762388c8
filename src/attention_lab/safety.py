"""Lightning side of the reliability features (see attention_lab.resilience for the rest):

- :class:`GracefulStop`: after SIGINT/SIGTERM, saves ``checkpoints/last.ckpt`` at the end of the current
  step and stops the run (``python scripts/train.py resume=<run dir>`` continues it);
- :class:`StopOnNonFiniteLoss`: stops at the first nan/inf training loss, before the bad update, so that no
  checkpoint ever holds nan weights;
- :class:`RngState` and :class:`ResumableSentenceTaskDataModule`: a resumed run draws the same random
  numbers and the same batches as an uninterrupted one, so that its final metrics are identical.

train.py adds these callbacks to every run.
"""

from __future__ import annotations

import logging
import os
import random
import signal
import threading
from pathlib import Path
from typing import Any

import lightning as L
import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from attention_lab.data.datamodule import SentenceTaskDataModule
from attention_lab.resilience import STOP, TrainingDiverged, TrainingInterrupted, stop_requested

log = logging.getLogger(__name__)


def last_checkpoint_path(trainer: L.Trainer) -> Path:
    callback = trainer.checkpoint_callback
    dirpath = getattr(callback, "dirpath", None)
    return Path(dirpath if dirpath else Path(trainer.default_root_dir) / "checkpoints") / "last.ckpt"


def save_last_checkpoint(trainer: L.Trainer) -> Path:
    """Write last.ckpt atomically (a kill during the write leaves the previous one intact)."""
    path = last_checkpoint_path(trainer)
    callback = trainer.checkpoint_callback
    if callback is not None and hasattr(callback, "last_model_path"):
        # Recorded in the checkpoint: the resumed ModelCheckpoint then keeps writing last.ckpt, not last-v1.ckpt.
        callback.last_model_path = str(path)
    tmp = path.with_name(f".{path.name}.tmp")
    trainer.save_checkpoint(tmp)
    os.replace(tmp, path)
    return path


class GracefulStop(L.Callback):
    """Turns the flag set by resilience.graceful_signals into a checkpoint and a clean stop."""

    @staticmethod
    def own_sigterm(trainer: L.Trainer) -> None:
        """Lightning installs its own SIGTERM handler when fit/validate starts; when the signal lands during
        validation it ends the process with exit status 0 and no checkpoint. In one process, ours takes over."""
        if STOP.handler is not None and trainer.world_size == 1 and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, STOP.handler)

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.own_sigterm(trainer)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.own_sigterm(trainer)
        signum = stop_requested()
        if signum is not None:  # the signal came during setup: nothing new to save
            raise TrainingInterrupted(signum, trainer.global_step, None)

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        signum = stop_requested()
        if signum is None:
            return
        path = save_last_checkpoint(trainer)
        log.warning("checkpoint of step %d saved to %s", trainer.global_step, path)
        raise TrainingInterrupted(signum, trainer.global_step, path)


class StopOnNonFiniteLoss(L.Callback):
    """Raises TrainingDiverged at the first nan/inf training loss, before backward() and the optimizer step:
    the weights in memory and in every checkpoint stay finite; last.ckpt is left as it was."""

    def __init__(self) -> None:
        self.checkpoint_step: int | None = None

    def on_save_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        self.checkpoint_step = int(checkpoint.get("global_step", trainer.global_step))

    def on_load_checkpoint(self, trainer: L.Trainer, pl_module: L.LightningModule, checkpoint: dict) -> None:
        self.checkpoint_step = int(checkpoint.get("global_step", 0))

    def on_before_backward(self, trainer: L.Trainer, pl_module: L.LightningModule, loss: torch.Tensor) -> None:
        if bool(torch.isfinite(loss).all()):
            return
        path = last_checkpoint_path(trainer)
        saved = path if path.is_file() else None
        raise TrainingDiverged(float(loss.detach().float().mean()), trainer.global_step, saved,
                               self.checkpoint_step if saved else None)


class RngState(L.Callback):
    """Saves the global random states (torch, Python, NumPy) in every checkpoint and restores them on resume:
    dropout masks after the resume are those of the uninterrupted run."""

    def state_dict(self) -> dict[str, Any]:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        return {
            "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
            "python": list(random.getstate()[1]),
            "numpy": {"kind": kind, "keys": torch.from_numpy(keys.astype(np.int64)), "pos": pos,
                      "has_gauss": has_gauss, "cached": cached},
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


class EpochShuffleSampler(Sampler[int]):
    """Shuffles like ``shuffle=True``, but the order of epoch e depends only on (seed, e), and a restored state
    skips the samples the interrupted run had already drawn in that epoch."""

    def __init__(self, size: int, seed: int) -> None:
        self.size, self.seed, self.epoch = size, seed, 0
        self.consumed = 0  # samples drawn in the current epoch
        self._resume: tuple[int, int] | None = None  # (epoch, samples to skip) from a checkpoint

    def set_epoch(self, epoch: int) -> None:  # called by Lightning before each epoch
        self.epoch = epoch

    def __len__(self) -> int:
        return self.size

    def __iter__(self):
        generator = torch.Generator().manual_seed(self.seed * 1_000_003 + self.epoch)
        order = torch.randperm(self.size, generator=generator).tolist()
        skip = self._resume[1] if self._resume is not None and self._resume[0] == self.epoch else 0
        self._resume = None
        self.consumed = skip
        for index in order[skip:]:
            self.consumed += 1
            yield index

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "consumed": self.consumed}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self._resume = (int(state["epoch"]), int(state["consumed"]))


class ResumableDataLoader(DataLoader):
    """A DataLoader with state_dict/load_state_dict: Lightning stores its position in every checkpoint."""

    def state_dict(self) -> dict[str, int]:
        return self.sampler.state_dict() if isinstance(self.sampler, EpochShuffleSampler) else {}

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state and isinstance(self.sampler, EpochShuffleSampler):
            self.sampler.load_state_dict(state)


class ResumableSentenceTaskDataModule(SentenceTaskDataModule):
    """SentenceTaskDataModule whose training batches can resume mid-epoch (single process; with several
    processes the distributed sampler of Lightning is used as before)."""

    def train_dataloader(self) -> DataLoader:
        if self.trainer is not None and self.trainer.world_size > 1:
            return super().train_dataloader()
        sampler = EpochShuffleSampler(len(self.train_set), self.seed)
        # Own generator: creating the iterator then draws nothing from the global RNG.
        return ResumableDataLoader(self.train_set, batch_size=self.batch_size, sampler=sampler,
                                   generator=torch.Generator().manual_seed(self.seed))
