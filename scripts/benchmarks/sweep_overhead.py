"""Section D: what a sweep job costs beyond its training, with the parallel launcher.

One sweep, ``python scripts/train.py -m hydra/launcher=parallel max_steps=<n> seed=0,1,...`` (as many jobs at a time
as the launcher's config says), exactly as a user starts it, plus the benchmark's timer callback in every job (a Hydra
override, as in the other training runs). For each job: its wall time, from the creation of its process (forked by
the launcher's fork server) to its last record (``run_info.json``, written when Hydra ends the job), minus its
training, the fit's loop from its first to its last step (the validations every ``val_check_interval`` steps
included: they are part of the training the run asked for). What is left is the job's start (its process, Hydra's
state and compose, the checks, the data, the model, the trainer) and its end (the final validation with its
ablation passes and figures, metrics.json, the records).
"""

from __future__ import annotations

import json
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.processes import ROOT, RunFailed, run_process
from benchmarks.rows import Progress, Row, check, median, no_progress

JOB_OVERHEAD_LIMIT_S = 1.0
RUN_INFO = "run_info.json"  # a job's last record: written by the lab's Hydra callback as the job ends
TIMER_FILE = "timer.json"  # the timer's JSON, in each job's dir


@dataclass(frozen=True)
class SweepPlan:
    jobs: int  # seeds 0..jobs-1: distinct runs
    max_steps: int


FULL_SWEEP = SweepPlan(jobs=4, max_steps=50)
QUICK_SWEEP = SweepPlan(jobs=2, max_steps=10)


def sweep_command(plan: SweepPlan, sweep_dir: Path, device: str = "cpu") -> list[str]:
    return [sys.executable, str(ROOT / "scripts" / "train.py"), "-m", "hydra/launcher=parallel",
            f"max_steps={plan.max_steps}", "seed=" + ",".join(str(seed) for seed in range(plan.jobs)),
            f"device={device}", f"hydra.sweep.dir={sweep_dir}",
            "+callbacks.benchmark_timer._target_=benchmarks.timer.BenchmarkTimer",
            f"+callbacks.benchmark_timer.path=${{paths.output_dir}}/{TIMER_FILE}",
            "+callbacks.benchmark_timer.warmup_steps=0"]


def job_times(job_dir: Path) -> dict[str, float]:
    """One job's phases in seconds, from its timer's JSON and the time its run_info.json was last written."""
    timer = json.loads((job_dir / TIMER_FILE).read_text())
    started, train_start, train_end = timer["process_start_wall"], timer["train_start_wall"], timer["train_end_wall"]
    if None in (started, train_start, train_end):
        raise RunFailed(f"{job_dir}: the timer recorded no process start or no training (/proc missing?)")
    ended = (job_dir / RUN_INFO).stat().st_mtime_ns / 1e9
    training = train_end - train_start
    return {"job_s": ended - started, "training_s": training, "start_s": train_start - started,
            "end_s": ended - train_end, "overhead_s": ended - started - training}


def run_sweep(plan: SweepPlan, *, device: str = "cpu", progress: Progress = no_progress,
              timeout: float = 900) -> list[dict[str, Any]]:
    """The sweep in a fresh temporary dir: each job's times (:func:`job_times`), by job number."""
    progress(f"start-up: a sweep of {plan.jobs} jobs of max_steps={plan.max_steps} (hydra/launcher=parallel)")
    with tempfile.TemporaryDirectory(prefix="attention-lab-sweep-") as workdir:
        sweep_dir = Path(workdir) / "sweep"
        _, proc = run_process(sweep_command(plan, sweep_dir, device), timeout=timeout)
        if proc.returncode != 0:
            raise RunFailed(f"the sweep exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
        return [{"job": num, **job_times(sweep_dir / str(num))} for num in range(plan.jobs)]


def sweep_rows(jobs: list[dict[str, Any]], plan: SweepPlan) -> tuple[list[Row], dict[str, Any]]:
    """The median job's overhead (the target) and its parts, with every job as a sample."""
    def samples(key: str) -> list[float]:
        return [job[key] for job in jobs]

    overhead = median(samples("overhead_s"))
    sweep = f"{plan.jobs} jobs of max_steps={plan.max_steps}"
    rows = [
        Row("D", "D/sweep_job_overhead", "sweep job (hydra/launcher=parallel): wall time minus its training", overhead,
            "s", target=f"<= {JOB_OVERHEAD_LIMIT_S:.0f} s", ok=check(overhead, "<=", JOB_OVERHEAD_LIMIT_S),
            note=f"median of {sweep}", samples=samples("overhead_s")),
        Row("D", "D/sweep_job_start", "sweep job: process created -> first training step starts",
            median(samples("start_s")), "s", samples=samples("start_s"), note="forked from the launcher's fork server"),
        Row("D", "D/sweep_job_end", "sweep job: last training step -> job recorded (final validation, records)",
            median(samples("end_s")), "s", samples=samples("end_s")),
        Row("D", "D/sweep_job_training", "sweep job: its training (steps and their validations)",
            median(samples("training_s")), "s", samples=samples("training_s")),
    ]
    return rows, {"sweep job overhead": overhead}
