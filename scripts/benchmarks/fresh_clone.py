#!/usr/bin/env python
"""Fresh clone -> first trained result: `make setup` with uv and with pip, from empty and from warm package caches,
and `make train` (set-up and training) from a fresh clone with warm caches, all in one run, with the pip/uv ratios.

    python scripts/benchmarks/fresh_clone.py                 # this checkout's HEAD; pip's two set-ups take minutes
    python scripts/benchmarks/fresh_clone.py --skip-pip      # uv only

Each case clones HEAD into a new temporary directory. "Cold": empty uv and pip caches of its own (UV_CACHE_DIR,
PIP_CACHE_DIR); "warm": the caches the cold case of the same installer filled. Packages still come from wherever
pip's configuration and PyPI point (a local torch wheel, where pip's configuration names one). The machine's load average
is printed beside the times: on a shared machine the wall seconds vary with it; the CPU seconds (user + system, of
every process a case started) and the ratios much less.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(command: list[str], cwd: Path, env: dict[str, str], log: Path) -> tuple[float, float]:
    """(wall seconds, CPU seconds of the command and everything it started)."""
    start, cpu = time.perf_counter(), children_cpu_s()
    with log.open("w") as out:
        proc = subprocess.run(command, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"error: {' '.join(command)} in {cwd} exited {proc.returncode}; its output: {log}")
    return seconds, children_cpu_s() - cpu


def clone(work: Path, name: str) -> Path:
    target = work / name
    subprocess.run(["git", "clone", "-q", str(ROOT), str(target)], check=True)
    return target


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--skip-pip", action="store_true", help="measure uv only")
    parser.add_argument("--keep", action="store_true", help="keep the clones and caches (printed)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="fresh_clone_"))
    caches = {installer: {"UV_CACHE_DIR": str(work / f"{installer}-uv-cache"),
                          "PIP_CACHE_DIR": str(work / f"{installer}-pip-cache")} for installer in ("uv", "pip")}
    base = {key: value for key, value in os.environ.items() if key not in ("PIP_NO_CACHE_DIR", "VIRTUAL_ENV")}

    def case(label: str, installer: str, targets: list[str]) -> tuple[float, float]:
        name = "".join(c if c.isalnum() else "-" for c in label)
        checkout = clone(work, name)
        env = {**base, **caches[installer]}
        load = os.getloadavg()[0]
        seconds = cpu = 0.0
        for target in targets:
            wall, used = timed(["make", target, f"INSTALLER={installer}"], checkout, env, work / f"{name}-{target}.log")
            seconds, cpu = seconds + wall, cpu + used
        print(f"{label:<38} {seconds:7.1f} s wall  {cpu:6.1f} s CPU   (load average {load:.1f})", flush=True)
        return seconds, cpu

    uv_cold = case("uv, cold cache: make setup", "uv", ["setup"])
    uv_warm = case("uv, warm cache: make setup", "uv", ["setup"])
    case("uv, warm cache: make train (all)", "uv", ["train"])
    if not args.skip_pip:
        pip_cold = case("pip, cold cache: make setup", "pip", ["setup"])
        pip_warm = case("pip, warm cache: make setup", "pip", ["setup"])
        for what, n in (("wall", 0), ("CPU", 1)):
            print(f"pip / uv, {what}: cold cache {pip_cold[n] / uv_cold[n]:.1f}x, warm cache {pip_warm[n] / uv_warm[n]:.1f}x")
    if args.keep:
        print(f"clones, caches and logs: {work}")
    else:
        subprocess.run(["rm", "-rf", str(work)], check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
