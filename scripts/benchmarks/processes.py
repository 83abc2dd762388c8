"""Subprocesses of the benchmarks: started from the repository root, with ``scripts/`` on PYTHONPATH so
that a training run can import this package's callback and profiler (they are not part of attention_lab)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # the repository
SCRIPTS = ROOT / "scripts"


class RunFailed(RuntimeError):
    """A benchmark subprocess exited with an error."""


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    paths = [str(SCRIPTS)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env.update(extra)
    return env


def run_process(args: list[str], *, env: dict[str, str] | None = None,
                timeout: float = 900) -> tuple[float, subprocess.CompletedProcess]:
    """(wall seconds, completed process) of one subprocess, timed from just before it is started."""
    env = child_env() if env is None else env
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    return time.perf_counter() - start, proc
