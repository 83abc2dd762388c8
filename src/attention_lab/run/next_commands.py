"""The commands that open a finished run, as the console prints them. One function per tool, so that a change
of a tool's command line is one edit here."""

from __future__ import annotations

import shlex
from pathlib import Path

from attention_lab.data.probe import EXAMPLE_TEXT


def tensorboard_command(run_dir: Path) -> str:
    """TensorBoard on this run alone, every logged step kept (scripts/start_tensorboard.py)."""
    return f"python scripts/start_tensorboard.py {shlex.quote(str(run_dir))}"


def visualize_command(run_dir: Path, text: str = EXAMPLE_TEXT) -> str:
    """Attention maps of any sentence through this run's model (scripts/visualize.py: the run dir, then --text)."""
    return shlex.join(["python", "scripts/visualize.py", str(run_dir), "--text", text])
