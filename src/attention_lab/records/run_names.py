"""The tab's name, and how it names a run: TensorBoard's run name is its path under the log directory
(``runs/<date>/<time>/tensorboard/heads=3``); the tab leads with what tells runs apart, the overrides the run
was trained with (the last part of that path, attention_lab.run.overrides.run_name), then where it lies."""

from __future__ import annotations

from pathlib import PurePosixPath

# The plugin's name: its records' plugin_name, its routes' prefix and the tab's URL fragment. Here, with the run
# names, so that naming the tab (a run's `next:` line) imports no TensorBoard.
PLUGIN_NAME = "attention_lab"
TENSORBOARD_DIR = "tensorboard"  # a run dir's events: <run dir>/tensorboard/<overrides> (configs/logger)
NO_OVERRIDES = "default settings"  # a run trained with no override: `python scripts/train.py`


def run_label(run: str) -> str:
    """``heads=3 · runs/2026-11-22/08-30-01-123456``; a run not laid out as the lab lays runs out keeps its name."""
    parts = PurePosixPath(run).parts
    if TENSORBOARD_DIR not in parts:
        return run
    at = len(parts) - 1 - parts[::-1].index(TENSORBOARD_DIR)
    overrides = "/".join(parts[at + 1:]) or NO_OVERRIDES
    where = "/".join(parts[:at])
    return f"{overrides} · {where}" if where else overrides
