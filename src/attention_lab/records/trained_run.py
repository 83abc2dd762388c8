"""A trained run read back: its files found (:func:`find_run`), its model loaded without running any code from
the checkpoint (:func:`load_module`), and ``attention_lab.load_run(path)`` in one call (docs/library.md, "A trained
run in Python"). The review tools, the attention tab and the library load runs here, so a checkpoint one of them
refuses is refused by all, in the same line.

Finding the run's files needs no torch, so a wrong path fails fast; :func:`load_module` and everything after it
import torch (never Lightning: a trained model is read with torch alone), within the bounds of
:mod:`attention_lab.records.model_bounds`.
"""

from __future__ import annotations

import logging
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from attention_lab.errors import ReviewError
from attention_lab.records.files import (
    BEST_CHECKPOINT,
    CHECKPOINT_SUFFIX,
    CHECKPOINTS,
    LAST_CHECKPOINT,
    MULTIRUN_RECORD,
    SAVED_CONFIG,
    SAVED_OVERRIDES,
    UnreadableRecord,
    read_yaml_record,
)
from attention_lab.records.model_bounds import RefusedCheckpoint, check_archive, check_checkpoint

if TYPE_CHECKING:
    from attention_lab.model import TrainedModel

log = logging.getLogger(__name__)

# last.ckpt is the model that metrics.json describes (the end of training); best.ckpt the best validation.
CHECKPOINT_NAMES = (LAST_CHECKPOINT, BEST_CHECKPOINT)


@dataclass
class RunFiles:
    """A trained run: its directory, the checkpoint to load and its composed config (if saved)."""

    run_dir: Path
    checkpoint: Path
    config: Any = None  # DictConfig of <run>/.hydra/config.yaml, unresolved; None without it


# ---------------------------------------------------------------------------------------------- run files

def find_run(path: str | Path) -> RunFiles:
    """The run dir's last checkpoint (the model its metrics.json describes) and config. ``path`` may also be a
    ``.ckpt`` file, e.g. ``<run>/checkpoints/best.ckpt``. Raises ReviewError with one line otherwise."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ReviewError(f"the run dir {path} does not exist: pass a run directory such as outputs/runs/<date>/<time>")
    if path.is_file():
        if path.suffix != CHECKPOINT_SUFFIX:
            raise ReviewError(f"{path} is a file but not a checkpoint (.ckpt): pass the run directory or one of its checkpoints")
        run_dir = path.parent.parent if path.parent.name == CHECKPOINTS else path.parent
        return RunFiles(run_dir, path, load_run_config(run_dir))
    checkpoint_dir = path / CHECKPOINTS
    found = [checkpoint_dir / name for name in CHECKPOINT_NAMES if (checkpoint_dir / name).is_file()]
    if not found:  # a checkpoint saved under another name (e.g. with ModelCheckpoint's filename changed)
        found = sorted(checkpoint_dir.glob(f"*{CHECKPOINT_SUFFIX}"), key=lambda p: p.stat().st_mtime, reverse=True)
    if not found:
        if (path / MULTIRUN_RECORD).is_file():
            jobs = sorted(p.parent.parent.name for p in path.glob(f"*/{SAVED_OVERRIDES}"))
            example = f" such as {path / jobs[0]}" if jobs else ""
            raise ReviewError(f"the run dir {path} is a sweep directory: pass one of its job directories{example}")
        raise ReviewError(f"the run dir {path} has no checkpoint (looked for {CHECKPOINTS}/{LAST_CHECKPOINT} and {BEST_CHECKPOINT}): "
                          "pass a run directory whose training has saved one")
    return RunFiles(path, found[0], load_run_config(path))


def load_run_config(run_dir: Path):
    """The run's saved config, read as data; None without one, or (with a warning) when it cannot be read: the
    maps need only the checkpoint."""
    config_file = run_dir / SAVED_CONFIG
    if not config_file.is_file():
        return None
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        data = read_yaml_record(config_file)
        return OmegaConf.create(data) if isinstance(data, dict) else None
    except (FileNotFoundError, UnreadableRecord, OmegaConfBaseException) as err:
        problem = err.problem if isinstance(err, UnreadableRecord) else type(err).__name__
        log.warning("warning: %s is unreadable (%s); the run's task and probe are left out", config_file, problem)
        return None


def describe_run(files: RunFiles, module) -> str:
    """One line: the run directory and the settings that shape its attention maps. The model's settings
    come from the checkpoint's hparams (exact for these weights), the task from the run's config."""
    config = module.config
    task = files.config.get("task", {}).get("name", "?") if files.config is not None else "?"
    stack = [f"mixers=[{','.join(config.mixers)}]"] if config.mixers else []
    parts = [f"variant={config.name}", *stack, f"heads={config.num_heads}", f"d_model={config.d_model}",
             f"layers={config.layers}", f"mask={config.mask.value}", f"position={config.position.value}"]
    if config.kv_heads is not None:
        parts.append(f"kv_heads={config.kv_heads}")
    if config.window is not None:
        parts.append(f"window={config.window}")
    parts += [f"block={config.block.name}", f"task={task}"]
    run_name = "/".join(files.run_dir.resolve().parts[-2:])
    return f"{run_name} · {' '.join(parts)} · {files.checkpoint.name}"


def load_module(files: RunFiles):
    """(TrainedModel in eval mode on the CPU, global step of the checkpoint): torch alone, no Lightning.

    The load uses ``weights_only=True``: a checkpoint is data. One whose unpickling needs anything beyond
    tensors and plain values (which could run code) is refused with a ReviewError, not loaded; so is one beyond
    the bounds of :mod:`attention_lab.records.model_bounds`, before its model is built."""
    from attention_lab.model import WeightsMismatch

    try:
        return read_module(files.checkpoint)
    except pickle.UnpicklingError:
        problem = ("it holds objects other than tensors and plain values, and unpickling them could run code; "
                   "refused (only checkpoints written by scripts/train.py are loaded)")
    except (RefusedCheckpoint, WeightsMismatch) as err:
        problem = str(err)
    except Exception as err:  # a truncated or foreign file, or memory running out: one line, not a traceback
        problem = f"{type(err).__name__}: {err}".splitlines()[0]
    # Raised here, after the handler: the error (which the attention tab keeps, to refuse the file again cheaply)
    # then holds no traceback, and so none of the frames that held the loaded checkpoint and what was built of it.
    raise ReviewError(f"cannot load checkpoint {files.checkpoint}: {problem}")


def read_module(path: Path):
    """load_module's work; raises RefusedCheckpoint, WeightsMismatch or whatever loading the file raised."""
    import torch

    from attention_lab.model import TrainedModel

    with open(path, "rb") as handle:
        if not zipfile.is_zipfile(handle):  # torch.save writes zip archives
            raise RefusedCheckpoint("it is not a file written by torch.save (truncated, or of another program)")
    check_archive(path)
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    hparams = checkpoint.get("hyper_parameters") if isinstance(checkpoint, dict) else None
    if not isinstance(hparams, dict) or not {"model", "vocab"} <= set(hparams):
        raise RefusedCheckpoint("its hparams hold no model config and vocabulary (a checkpoint of another program)")
    step = int(checkpoint.get("global_step", 0))
    check_checkpoint(checkpoint)
    return TrainedModel.from_checkpoint(checkpoint), step


def load_run(path: str | Path) -> TrainedModel:
    """The trained model of a run dir (its ``checkpoints/last.ckpt``, the model its metrics.json describes) or of
    a ``.ckpt`` file, in eval mode on the CPU: ``.vocab`` its words (index = token id), ``.predict_words`` a
    sentence's predictions and attention maps, ``.model`` the SequenceModel whose hook points
    (:mod:`attention_lab.attention.hooks`) ablate and patch heads. Raises
    :class:`attention_lab.errors.ReviewError` (one line) when ``path`` holds no run or its checkpoint is
    refused."""
    model, _step = load_module(find_run(path))
    return model
