"""Checkpoint files: written atomically inside the run dir, loaded without running code, and on resume the
newest checkpoint that loads is used, from the run dir given (not from paths recorded in the files)."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.plugins.io import TorchCheckpointIO

from attention_lab.records.files import CHECKPOINTS, LAST_CHECKPOINT

log = logging.getLogger(__name__)


class AtomicCheckpointIO(TorchCheckpointIO):
    """Writes ``<name>.tmp`` beside the target, fsyncs it, then renames it over the target: a full disk or a
    kill mid-write leaves the previous checkpoint intact (a move from the system temp dir to another
    filesystem is a copy, and can be cut short).

    torch.save is handed the path, not an open file: its archive writer (C++) then owns the file it writes. Handed
    a Python file, the writer finishes the archive through that file's ``write``, and a Ctrl-C between the
    archive's last record and its end leaves it unfinished, kept alive by the exception's traceback, while
    ``with open`` closes the file: when the traceback is freed (at exit), the writer's destructor wrote to the closed
    file and the process aborted (SIGABRT, "write to closed file") instead of exiting 130."""

    def save_checkpoint(self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: Any = None) -> None:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        try:
            torch.save(checkpoint, tmp)
            with open(tmp, "rb+") as handle:  # written and closed by torch: flushed to the disk here
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def last_checkpoint_path(trainer: L.Trainer) -> Path:
    callback = trainer.checkpoint_callback
    dirpath = getattr(callback, "dirpath", None)
    return Path(dirpath if dirpath else Path(trainer.default_root_dir) / CHECKPOINTS) / LAST_CHECKPOINT


def load_checkpoint(path: Path) -> dict[str, Any]:
    """A checkpoint's contents; tensors and plain types only (``weights_only=True``: nothing in it runs)."""
    return torch.load(path, map_location="cpu", weights_only=True)


def resume_checkpoint(run_dir: Path) -> Path | None:
    """The checkpoint to continue ``run_dir`` from: last.ckpt, or when it does not load, the valid checkpoint
    of ``<run dir>/checkpoints`` with the highest step (with a warning). None when there is none."""
    folder = run_dir / CHECKPOINTS
    candidates = sorted(folder.glob("*.ckpt"), key=lambda p: (p.name != LAST_CHECKPOINT, p.name))
    steps: dict[Path, int] = {}
    for path in candidates:
        try:
            steps[path] = int(load_checkpoint(path)["global_step"])
        except Exception as err:  # noqa: BLE001 - truncated or foreign file: skip it, say so
            log.warning("checkpoint %s does not load (%s: %s); it is skipped", path, type(err).__name__, err)
            continue
        if path.name == LAST_CHECKPOINT:
            return path
    if not steps:
        return None
    best = max(steps, key=lambda p: steps[p])
    log.warning("resuming from %s (step %d): %s is missing or corrupt", best, steps[best], folder / LAST_CHECKPOINT)
    return best
