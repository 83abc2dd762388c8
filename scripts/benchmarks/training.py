"""The training runs of sections B, C and D: ``python scripts/train.py``, exactly as a user starts it, plus
one timing callback and one profiler added by Hydra overrides; and the plain PyTorch loop.

The runs take turns in rounds whose order rotates: {maps on, maps off, ablation off, plain loop, Lightning's floor}.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.processes import ROOT, RunFailed, child_env, run_process
from benchmarks.rows import Progress, no_progress


@dataclass(frozen=True)
class TrainingPlan:
    max_steps: int | None  # None: the default run, until early stopping finds the task solved
    warmup_steps: int  # steps not counted in the throughput window
    rounds: int  # each round: framework with maps, framework without maps, plain loop (order rotates)


FULL_TRAINING = TrainingPlan(max_steps=None, warmup_steps=20, rounds=3)
QUICK_TRAINING = TrainingPlan(max_steps=30, warmup_steps=5, rounds=1)
# "Maps off": neither the PNG maps nor the attention tab's tensor summaries (one callback logs both)
MAPS_OFF = ("~callbacks.attention_maps",)
ABLATION_OFF = ("ablation=[]", "patching=false")  # the head ablation and patching of the final validation, off
MAP_LOGGER = "ProbeLogger"  # the class whose hooks the profiler times


def timing_overrides(timer_path: Path, warmup_steps: int) -> list[str]:
    """The benchmark's callback (last in the list) and profiler; both live in scripts/benchmarks/."""
    return ["+callbacks.benchmark_timer._target_=benchmarks.timer.BenchmarkTimer",
            f"+callbacks.benchmark_timer.path={timer_path}",
            f"+callbacks.benchmark_timer.warmup_steps={warmup_steps}",
            "+trainer.profiler._target_=benchmarks.hook_profiler.CallbackHookProfiler",
            f"+trainer.profiler.callback={MAP_LOGGER}"]


def run_framework(overrides: list[str], *, workdir: Path, warmup_steps: int,
                  env: dict[str, str] | None = None, timeout: float = 900) -> dict[str, Any]:
    """scripts/train.py with ``overrides`` (+ the timer) in a fresh run dir: the timer's JSON, plus
    ``process_s`` (whole process) and the timestamps as seconds after the process was started."""
    workdir.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=workdir)) / "run"
    timer_path = run_dir.with_name("timer.json")
    args = [sys.executable, str(ROOT / "scripts" / "train.py"), *overrides, f"hydra.run.dir={run_dir}",
            *timing_overrides(timer_path, warmup_steps)]
    started_wall = time.time()
    wall, proc = run_process(args, env=env, timeout=timeout)
    if proc.returncode != 0 or not timer_path.is_file():
        raise RunFailed(f"scripts/train.py {' '.join(overrides)} exited {proc.returncode}:\n"
                        f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    result = json.loads(timer_path.read_text())
    result.update(process_s=wall, process_start=started_wall, run_dir=str(run_dir))
    for key in ("fit_start", "train_start", "first_batch", "first_step", "solved"):
        stamp = result.get(f"{key}_wall")
        result[f"{key}_after_start_s"] = None if stamp is None else stamp - started_wall
    return result


REFERENCES = {"plain": "benchmarks.plain_loop", "floor": "benchmarks.lightning_floor"}  # B's references, by kind


def run_plain_loop(overrides: list[str], *, steps: int, warmup_steps: int, workdir: Path, device: str = "cpu",
                   threads: int | None = None, env: dict[str, str] | None = None,
                   timeout: float = 900, kind: str = "plain") -> dict[str, Any]:
    """One of B's references (``kind``: the plain loop, or Lightning's floor) in a fresh process (imports and
    thread pools as a training run has them)."""
    workdir.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkstemp(prefix="plain-", suffix=".json", dir=workdir)[1])
    request = {"overrides": overrides, "steps": steps, "warmup_steps": warmup_steps, "device": device,
               "threads": threads, "out": str(out)}
    wall, proc = run_process([sys.executable, "-m", REFERENCES[kind], json.dumps(request)], env=env,
                             timeout=timeout)
    if proc.returncode != 0:
        raise RunFailed(f"{REFERENCES[kind]} exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    result = json.loads(out.read_text())
    result["process_s"] = wall
    return result


def run_training(plan: TrainingPlan, *, sections: str, device: str = "cpu", workdir: Path,
                 progress: Progress = no_progress) -> dict[str, list[dict]]:
    """The training runs of B, C and D: ``python scripts/train.py device=<device>`` (the default run; with
    --quick, max_steps=30), with and without the attention maps, and the plain loop for as many steps.
    Returns the runs by kind: maps_on (always: B, C and D use it), maps_off and ablation_off (C), plain and floor
    (B: the plain loop, and Lightning's own loop alone)."""
    base = [f"device={device}"] + ([f"max_steps={plan.max_steps}"] if plan.max_steps else [])
    kinds = (["maps_on"] + (["maps_off", "ablation_off"] if "C" in sections else [])
             + (["plain", "floor"] if "B" in sections else []))
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    settings: dict[str, Any] = {}  # the framework's thread settings and step count, copied by the plain loop
    for round_index in range(plan.rounds):
        shift = round_index % len(kinds)
        order = kinds[shift:] + kinds[:shift]
        while not settings and order[0] in REFERENCES:  # the references need a framework run first
            order = [*order[1:], order[0]]
        for kind in order:
            progress(f"training runs: round {round_index + 1}/{plan.rounds} · {kind.replace('_', ' ')}")
            if kind in REFERENCES:
                policy = settings["omp_wait_policy"]
                env = child_env(OMP_WAIT_POLICY=policy) if policy else child_env()
                runs[kind].append(run_plain_loop(base, steps=settings["steps"], warmup_steps=plan.warmup_steps,
                                                 workdir=workdir, device=device, threads=settings["torch_threads"],
                                                 env=env, kind=kind))
                continue
            switched_off = {"maps_off": list(MAPS_OFF), "ablation_off": list(ABLATION_OFF)}.get(kind, [])
            result = run_framework(base + switched_off, workdir=workdir, warmup_steps=plan.warmup_steps)
            result["kind"] = kind
            if not settings:
                settings = {k: result[k] for k in ("steps", "torch_threads", "omp_wait_policy")}
            runs[kind].append(result)
    return runs
