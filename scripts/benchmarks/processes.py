"""Subprocesses of the benchmarks: started from the repository root, with ``scripts/`` on PYTHONPATH so
that a training run can import this package's callback and profiler (they are not part of attention_lab)."""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

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


def in_fresh_process(function: Callable[[dict[str, Any]], T], request: dict[str, Any], *, what: str) -> T:
    """``function(request)`` in a process of its own that has run nothing before: forked for this call from a fork
    server that imported torch and the lab once (the first call starts it), so a peak-memory reading sees only
    this call's allocations, as in a new interpreter, without importing torch anew for every reading. The
    parallel launcher starts its jobs the same way."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "attention_lab.attention"])
    with ProcessPoolExecutor(max_workers=1, mp_context=context) as pool:
        try:
            return pool.submit(function, request).result()
        except BrokenProcessPool as err:
            raise RunFailed(f"{what}: its process ended before it answered") from err
