"""The commands the lab prints for a person to paste (a run's ``next:`` lines, a sweep's, ``continue with: ...``),
written so that they run in the shell that started the lab.

``make train`` runs ``.venv/bin/python`` from a shell where, most often, no venv is active: there a bare ``python``
is another interpreter without the lab (``ModuleNotFoundError``), or none at all. So a command names ``python``
only when the shell's ``python`` (the first on its PATH) lies in the bin dir of the interpreter running the lab,
as in an activated venv; otherwise the interpreter's own path. Neither path is resolved through symlinks: a venv's
``bin/python`` is a link to the base interpreter, which has none of the venv's packages.

One function per tool (:func:`tensorboard_command`, :func:`visualize_command`, :func:`compare_command`), for a
run's end note (:class:`attention_lab.callbacks.lifecycle.RunEndNote`) and a sweep's (:func:`sweep_note`): a change of a
tool's command line is one edit here.

Paths are shown as a user types them: relative to the working dir when they lie below it (``.venv/bin/python``,
``scripts/visualize.py``), else absolute. This module imports nothing beyond the standard library and the tab's
name (:mod:`attention_lab.records.run_names`): scripts and error lines that must stay fast use it.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from attention_lab.records.run_names import PLUGIN_NAME

# The project's scripts/ beside src/ (an editable install, as `make setup` makes: this checkout's).
SCRIPTS = Path(__file__).resolve().parents[3] / "scripts"


def shown_path(path: Path, cwd: Path | None = None) -> Path:
    """``path`` (made absolute, links kept) relative to ``cwd`` (default: the working dir) when it lies below it,
    else absolute."""
    base = Path(os.path.abspath(cwd or os.getcwd()))
    absolute = Path(os.path.abspath(path))
    return absolute.relative_to(base) if absolute.is_relative_to(base) else absolute


def interpreter(cwd: Path | None = None) -> str:
    """``python`` when that is what the shell's PATH finds in this interpreter's bin dir, else this interpreter's
    path (:func:`shown_path`)."""
    executable = Path(os.path.abspath(sys.executable))
    found = shutil.which("python")
    if found is not None and Path(os.path.abspath(found)).parent == executable.parent:
        return "python"
    return str(shown_path(executable, cwd))


def script_command(script: str, *args: str, cwd: Path | None = None) -> str:
    """``<interpreter> <scripts/script> args...``, each word quoted for a POSIX shell. ``script`` is a file of the
    project's scripts/ (``"visualize.py"``), shown relative to ``cwd`` when scripts/ lies below it, else
    absolute."""
    base = Path(os.path.abspath(cwd or os.getcwd())).resolve()
    path = SCRIPTS / script
    shown = path.relative_to(base) if SCRIPTS.is_relative_to(base) else path
    return shlex.join([interpreter(cwd), str(shown), *args])


# TensorBoard's page on its default port, opened on the attention tab (the fragment names the dashboard).
ATTENTION_TAB = f"http://localhost:6006/#{PLUGIN_NAME}"


def compare_command(sweep_dir: Path) -> str:
    """The jobs of a sweep side by side: a table, and compare.png (scripts/compare.py)."""
    return script_command("compare.py", str(sweep_dir))


def sweep_note(sweep_dir: Path) -> str:
    """The last lines of a sweep: the commands that open it."""
    shown = shown_path(sweep_dir)
    return f"next: {compare_command(shown)}\n      {tensorboard_command(shown)}"


def tensorboard_command(run_dir: Path) -> str:
    """TensorBoard on this run alone, every logged step kept (scripts/start_tensorboard.py)."""
    return script_command("start_tensorboard.py", str(run_dir))


def tensorboard_line(run_dir: Path) -> str:
    """The command, and the tab to open once it runs (a shell comment: the line still pastes as a command)."""
    return f"{tensorboard_command(run_dir)}   # then the attention tab: {ATTENTION_TAB}"


def visualize_command(run_dir: Path, text: str) -> str:
    """Attention maps of any sentence through this run's model (scripts/visualize.py: the run dir, then --text)."""
    return script_command("visualize.py", str(run_dir), "--text", text)
