"""Shared test helpers: compose configs in-process, and run scripts/train.py as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from attention_lab.config import register_configs

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "configs"
TRAIN = ROOT / "scripts" / "train.py"
# Quiet, fast runs: no progress bar redraws in captured output.
QUIET = ["trainer.enable_progress_bar=false", "~callbacks.progress_bar"]


def compose_config(overrides: list[str] | None = None, *, return_hydra_config: bool = False):
    """The composed training config, as scripts/train.py would see it."""
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose("train", overrides=overrides or [], return_hydra_config=return_hydra_config)


def script_env() -> dict[str, str]:
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONWARNINGS="ignore", HYDRA_FULL_ERROR="0")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def run_script(script: Path | str, *args: str, cwd: Path | None = None, timeout: float = 300,
               check: bool = False) -> subprocess.CompletedProcess:
    """Run a script of scripts/ in a subprocess; output captured as text."""
    proc = subprocess.run([sys.executable, str(script), *args], cwd=cwd or ROOT, env=script_env(),
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{script} {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def run_train(run_dir: Path, *overrides: str, multirun: bool = False, timeout: float = 300,
              check: bool = True) -> subprocess.CompletedProcess:
    """scripts/train.py with its outputs in run_dir (hydra.run.dir, or hydra.sweep.dir with -m)."""
    where = f"hydra.sweep.dir={run_dir}" if multirun else f"hydra.run.dir={run_dir}"
    args = (["-m"] if multirun else []) + [*overrides, *QUIET, where]
    return run_script(TRAIN, *args, timeout=timeout, check=check)


@pytest.fixture(autouse=True)
def _clear_hydra():
    yield
    GlobalHydra.instance().clear()
