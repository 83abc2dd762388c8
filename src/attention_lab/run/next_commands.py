"""The commands that open a finished run or sweep, as the console prints them. One function per tool, so that a
change of a tool's command line is one edit here."""

from __future__ import annotations

import shlex
from pathlib import Path

from attention_lab.data.probe import EXAMPLE_TEXT
from attention_lab.tensorboard_plugin import PLUGIN_NAME

# TensorBoard's page on its default port, opened on the attention tab (the fragment names the dashboard).
ATTENTION_TAB = f"http://localhost:6006/#{PLUGIN_NAME}"


def shown_path(path: Path) -> Path:
    """``path`` relative to the working directory when it lies below it (what a user typed), else absolute."""
    absolute = path.resolve()
    try:
        return absolute.relative_to(Path.cwd().resolve())
    except ValueError:
        return absolute


def compare_command(sweep_dir: Path) -> str:
    """The jobs of a sweep side by side: a table, and compare.png (scripts/compare.py)."""
    return f"python scripts/compare.py {shlex.quote(str(sweep_dir))}"


def sweep_note(sweep_dir: Path) -> str:
    """The last lines of a sweep: the commands that open it."""
    shown = shown_path(sweep_dir)
    return f"next: {compare_command(shown)}\n      {tensorboard_command(shown)}"


def tensorboard_command(run_dir: Path) -> str:
    """TensorBoard on this run alone, every logged step kept (scripts/start_tensorboard.py)."""
    return f"python scripts/start_tensorboard.py {shlex.quote(str(run_dir))}"


def tensorboard_line(run_dir: Path) -> str:
    """The command, and the tab to open once it runs (a shell comment: the line still pastes as a command)."""
    return f"{tensorboard_command(run_dir)}   # then the attention tab: {ATTENTION_TAB}"


def visualize_command(run_dir: Path, text: str = EXAMPLE_TEXT) -> str:
    """Attention maps of any sentence through this run's model (scripts/visualize.py: the run dir, then --text)."""
    return shlex.join(["python", "scripts/visualize.py", str(run_dir), "--text", text])
