"""A run writes only into its own dir: checked on what was built, before training.

Where a logger or a checkpoint callback writes comes from many arguments together (``save_dir``, ``name``,
``version``, ``sub_dir``, ``dirpath``, ``filename``, positional ones), so instead of listing keys, the paths that
the built objects report through their public attributes must resolve inside the run dir. This holds for every
run, whatever set them: a command line, a preset, or a record replayed by ``resume=``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from lightning.pytorch import Trainer
from lightning.pytorch.callbacks import ModelCheckpoint

from attention_lab.errors import ConfigError

LOGGER_DIRS = ("save_dir", "root_dir", "log_dir")  # Logger's public properties: where its files go


def checkpoint_files(callback: ModelCheckpoint, default_dir: str) -> Iterator[tuple[str, str]]:
    """(what, path) of the folder and files a checkpoint callback writes. Without a ``dirpath`` of its own,
    Lightning gives it one under the trainer's dirs (checked themselves): its names are read from
    ``default_dir``."""
    if callback.dirpath:
        yield "dirpath", str(callback.dirpath)
    names = [("filename", callback.format_checkpoint_name({}))]  # placeholders such as {epoch} filled with 0
    if callback.save_last:
        names.append(("last checkpoint", callback.format_checkpoint_name({}, callback.CHECKPOINT_NAME_LAST)))
    for what, name in names:
        yield what, name if callback.dirpath else str(Path(default_dir) / name)


def written_paths(trainer: Trainer, built: Mapping[str, Any]) -> Iterator[tuple[str, str, str]]:
    """(setting, what, path) for every folder or file the trainer's loggers and checkpoint callbacks write;
    ``built``: the config's key of each object built from it (``logger.tensorboard``), for the messages."""
    setting = {id(obj): key for key, obj in built.items()}
    yield "trainer.default_root_dir", "default_root_dir", str(trainer.default_root_dir)
    for logger in trainer.loggers:
        for what in LOGGER_DIRS:
            where = getattr(logger, what)
            if where is not None:
                yield setting.get(id(logger), type(logger).__name__), what, str(where)
    for callback in trainer.checkpoint_callbacks:
        if isinstance(callback, ModelCheckpoint):
            for what, where in checkpoint_files(callback, str(trainer.default_root_dir)):
                yield setting.get(id(callback), type(callback).__name__), what, where


def check_writes(run_dir: Path, output_dir: Path, trainer: Trainer, built: Mapping[str, Any]) -> None:
    """Raises ConfigError, before anything is written there, when the run's ``output_dir`` (``paths.output_dir``)
    or a path of :func:`written_paths` resolves outside ``run_dir`` (a relative path: from the working directory,
    as the classes read it)."""
    home = run_dir.resolve()
    for setting, what, where in [("paths.output_dir", "output_dir", str(output_dir)), *written_paths(trainer, built)]:
        path = Path(where).resolve()
        if not path.is_relative_to(home):
            raise ConfigError(f"{setting} is invalid: it would write {path} (its {what}), outside the run dir {home}; "
                              "a run writes only into its own dir")

