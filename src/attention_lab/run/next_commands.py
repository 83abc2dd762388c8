"""The commands that open a finished run, as the console prints them. One function per tool, so that a change
of a tool's command line is one edit here."""

from __future__ import annotations

import shlex
from pathlib import Path

from attention_lab.data.probe import EXAMPLE_TEXT
from attention_lab.tensorboard_plugin.summary import PLUGIN_NAME

# TensorBoard's page on its default port, opened on the attention tab (the fragment names the dashboard).
ATTENTION_TAB = f"http://localhost:6006/#{PLUGIN_NAME}"


def tensorboard_command(run_dir: Path) -> str:
    """TensorBoard on this run alone, every logged step kept (scripts/start_tensorboard.py)."""
    return f"python scripts/start_tensorboard.py {shlex.quote(str(run_dir))}"


def tensorboard_line(run_dir: Path) -> str:
    """The command, and the tab to open once it runs (a shell comment: the line still pastes as a command)."""
    return f"{tensorboard_command(run_dir)}   # then the attention tab: {ATTENTION_TAB}"


def visualize_command(run_dir: Path, text: str = EXAMPLE_TEXT) -> str:
    """Attention maps of any sentence through this run's model (scripts/visualize.py: the run dir, then --text)."""
    return shlex.join(["python", "scripts/visualize.py", str(run_dir), "--text", text])
