"""A run or sweep dir handed to a resume is written into only where it really is: no link leads the lab out.

A job dir replaced by a symlink (to another sweep, to a user's folder) would receive checkpoints, TensorBoard
files and records, and another sweep's jobs would then count as this one's. So before anything is written, a
resume refuses a dir that holds a symlinked folder (a job dir, ``checkpoints/``) or a link to a file outside it.
"""

from __future__ import annotations

import os
from pathlib import Path

from attention_lab.errors import ConfigError


def escaping_link(folder: Path, only: str | None = None) -> tuple[Path, str] | None:
    """The first symlink under ``folder`` (or under its entry ``only``) that the lab would follow elsewhere, with
    why; None if there is none."""
    root = folder.resolve()
    for here, dirs, files in os.walk(root):  # os.walk never descends into a symlinked folder
        if only is not None and Path(here) == root:
            dirs[:] = [name for name in dirs if name == only]
            files = [name for name in files if name == only]
        for name in [*dirs, *files]:
            path = Path(here) / name
            if not path.is_symlink():
                continue
            target = path.resolve()
            if path.is_dir():
                return path.relative_to(root), f"a symlink to the folder {target}"
            if not target.is_relative_to(root):
                return path.relative_to(root), f"a symlink to {target}, outside it"
    return None


def check_contained(folder: Path, setting: str, only: str | None = None) -> None:
    """Raises ConfigError, before anything is written, when ``folder`` (or its entry ``only``) holds a link the lab
    would write through."""
    found = escaping_link(folder, only)
    if found is not None:
        path, what = found
        raise ConfigError(f"{setting} is invalid: its {path} is {what}; a resume writes only into the dir it was "
                          "given and does not follow it (replace the link with the folder itself, or remove it)")
