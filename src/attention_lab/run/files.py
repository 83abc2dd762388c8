"""The files of a run dir and a sweep dir, and how they are written (atomically: readers never see half)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

RUN_INFO = "run_info.json"  # status, error, overrides, wall time of one run (or sweep job)
METRICS = "metrics.json"  # final metrics only: byte-identical for the same config and seed on CPU
SUMMARY = "sweep_summary.json"
SUMMARY_CSV = "sweep_summary.csv"
FOLDS = "sweep_folds.json"  # a product sweep's combinations folded into an earlier job that trains the same run
REFUSED = "refused_jobs.json"  # jobs of a resumed sweep whose dir holds another run: {job number: row}
MULTIRUN_RECORD = "multirun.yaml"  # Hydra's record of a sweep's config and command line
CHECKPOINTS = "checkpoints"
LAST_CHECKPOINT = "last.ckpt"  # the end of training: the model metrics.json describes
BEST_CHECKPOINT = "best.ckpt"  # the best validation (ModelCheckpoint's filename in configs/callbacks/default.yaml)
CHECKPOINT_SUFFIX = ".ckpt"
TRACEBACK = "traceback.txt"
LOCK = ".run.lock"  # held by the process training in a run dir
RESUME_LOCK = ".resume.lock"  # held by the resume of a sweep, in the sweep dir
SAVED_OVERRIDES = Path(".hydra") / "overrides.yaml"
SAVED_CONFIG = Path(".hydra") / "config.yaml"


def replace_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` beside ``path``, then rename it over ``path``: readers see the old file or the new one, and
    a failed write (a full disk) leaves the old one and no temp file. Nothing is written through a link: a symlink
    at ``path`` is replaced, not followed, and the temp file is a new file (created exclusively, after removing
    whatever had its name). The temp file keeps ``path``'s suffix, which writers such as matplotlib's savefig read
    the format from."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        tmp.unlink(missing_ok=True)  # a link planted under the temp file's name is removed, not followed
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    replace_atomically(path, lambda tmp: tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n"))


def write_text(path: Path, text: str) -> None:
    replace_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def save_yaml(config: Any, path: Path) -> None:
    """An OmegaConf config as YAML, replaced atomically."""
    from omegaconf import OmegaConf

    replace_atomically(path, lambda tmp: OmegaConf.save(config, tmp))


def read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; {} when it is missing or not a JSON object."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def tensorboard_dir(run_dir: Path) -> Path:
    """Where the run's TensorBoard events are: ``<run dir>/tensorboard/<run name>`` (``tensorboard/`` itself for a
    run without overrides)."""
    found = sorted(run_dir.glob("tensorboard/**/events.out.tfevents.*"), key=lambda p: p.stat().st_mtime)
    return found[-1].parent if found else run_dir / "tensorboard"


def secondary_process() -> bool:
    """A data-parallel worker other than the first (Lightning's DDP launcher, torchrun or SLURM tasks re-run
    this script with the same run dir). Such a worker neither claims the run dir nor writes its records."""
    return any(os.environ.get(var, "0").strip() not in ("", "0")
               for var in ("LOCAL_RANK", "NODE_RANK", "RANK", "SLURM_PROCID"))
