"""The callback that a benchmarked training run gets: timestamps of its phases, written as JSON.

Added by Hydra overrides (see benchmarks.training), last in the callback list. Training throughput is
measured from the start of batch ``warmup_steps`` to the end of the last batch, minus the validation
intervals in between (from validation start to the next training batch: validation, checkpointing and
early stopping). The time spent in the attention-map logger comes from the run's profiler
(benchmarks.hook_profiler), when it has one.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import lightning as L
import torch

from attention_lab.callbacks.steps_to_solve import is_solved
from benchmarks.hook_profiler import CallbackHookProfiler


def process_start_wall() -> float | None:
    """When this process was created (fork or exec), as seconds since the epoch, to the kernel's clock tick (10 ms):
    now minus the process's age, the uptime less its start time in ticks since boot; None where /proc is missing.
    A sweep job forked by the parallel launcher starts long after its sweep."""
    try:
        started_ticks = int(Path("/proc/self/stat").read_text().rsplit(")", 1)[1].split()[19])  # field 22 of stat(5)
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, IndexError, ValueError):
        return None
    return time.time() - (uptime - started_ticks / os.sysconf("SC_CLK_TCK"))


class Stopwatch:
    """Wall and CPU seconds since ``start``, minus the pauses between ``pause`` and ``resume``."""

    def __init__(self) -> None:
        self.started: tuple[float, float] | None = None
        self.paused: tuple[float, float] | None = None
        self.paused_s = [0.0, 0.0]

    @staticmethod
    def now() -> tuple[float, float]:
        return time.perf_counter(), time.process_time()

    def start(self) -> None:
        self.started = self.now()

    def pause(self) -> None:
        self.paused = self.now()

    def resume(self) -> None:
        if self.paused is not None and self.started is not None:
            wall, cpu = self.now()
            self.paused_s[0] += wall - self.paused[0]
            self.paused_s[1] += cpu - self.paused[1]
        self.paused = None

    def elapsed(self, until: tuple[float, float]) -> tuple[float, float] | None:
        if self.started is None:
            return None
        return (until[0] - self.started[0] - self.paused_s[0], until[1] - self.started[1] - self.paused_s[1])


class BenchmarkTimer(L.Callback):
    """Timestamps of one training run, written to ``path`` (JSON) at the end of fit."""

    def __init__(self, path: str, warmup_steps: int = 10) -> None:
        self.final_validation_start: float | None = None
        self.path = Path(path)
        self.warmup_steps = warmup_steps
        self.batches_started = 0
        self.steps = 0
        self.window = Stopwatch()  # the throughput window, validation excluded
        self.last_batch_end: tuple[float, float] | None = None
        self.fit_start: tuple[float, float] | None = None
        self.walls: dict[str, float | None] = dict.fromkeys(("fit_start", "train_start", "first_batch",
                                                             "first_step", "solved", "train_end"))
        self.validations = 0
        self.solved_step: int | None = None
        self.best_seq_acc: float | None = None

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.fit_start = Stopwatch.now()
        self.walls["fit_start"] = time.time()

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.walls["train_start"] = time.time()

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any,
                             batch_idx: int) -> None:
        if self.walls["first_batch"] is None:
            self.walls["first_batch"] = time.time()
        self.window.resume()
        if self.batches_started == self.warmup_steps:
            self.window.start()
        self.batches_started += 1

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self.last_batch_end = Stopwatch.now()
        self.steps += 1
        if self.walls["first_step"] is None:
            self.walls["first_step"] = time.time()

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.walls["train_end"] = time.time()

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.state.fn == "validate":  # train.py's final validation, after fit (the head ablation runs in it)
            self.final_validation_start = time.perf_counter()
        elif not trainer.sanity_checking:
            self.window.pause()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.state.fn == "validate" and self.final_validation_start is not None:
            # fit wrote the JSON already; the final validation's time is added to it.
            result = json.loads(self.path.read_text())
            result["final_validation_s"] = time.perf_counter() - self.final_validation_start
            self.path.write_text(json.dumps(result, indent=2))
            return
        if trainer.sanity_checking:
            return
        self.validations += 1
        value = trainer.callback_metrics.get("val/seq_acc")
        if value is None:
            return
        value = float(value)
        self.best_seq_acc = value if self.best_seq_acc is None else max(self.best_seq_acc, value)
        if is_solved(value) and self.walls["solved"] is None:
            self.walls["solved"] = time.time()
            self.solved_step = trainer.global_step

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        now = Stopwatch.now()
        window_steps = self.steps - self.warmup_steps
        train = self.window.elapsed(self.last_batch_end) if self.last_batch_end and window_steps > 0 else None
        profiler = trainer.profiler
        result = {
            "steps": self.steps,
            "window_steps": window_steps,
            "train_s": train[0] if train else None,
            "steps_per_s": window_steps / train[0] if train else None,
            "train_cpu_s": train[1] if train else None,
            "steps_per_cpu_s": window_steps / train[1] if train else None,
            "validation_s": self.window.paused_s[0],
            "validations": self.validations,
            "fit_s": now[0] - self.fit_start[0] if self.fit_start else None,
            "fit_cpu_s": now[1] - self.fit_start[1] if self.fit_start else None,
            **{f"{key}_wall": value for key, value in self.walls.items()},
            "solved_step": self.solved_step,
            "best_seq_acc": self.best_seq_acc,
            # seconds of every call of each map-logger hook, in call order
            "map_logger_hooks_s": dict(profiler.durations) if isinstance(profiler, CallbackHookProfiler) else {},
            "process_start_wall": process_start_wall(),
            "torch_threads": torch.get_num_threads(),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        }
        self.path.write_text(json.dumps(result, indent=2))
