"""The failure policy of the task function, in one place (as lightning-hydra-template's ``task_wrapper``).

Every run ends in a recorded state in ``<run dir>/run_info.json``: ok, failed (one-line error; a traceback
file for bugs) or interrupted (a signal; exit status 128 + signal, with the command that continues the run).
A single run exits with one ``error:`` line; a failed sweep job is recorded and the sweep goes on.
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
from pathlib import Path

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from attention_lab.errors import ConfigError, TrainingInterrupted
from attention_lab.run import resume as resuming
from attention_lab.run.describe import describe, expected_error
from attention_lab.run.files import SUMMARY, TRACEBACK, secondary_process
from attention_lab.run.overrides import run_name
from attention_lab.run.run_dir import RunDirLock, RunInfo
from attention_lab.run.signals import StopSignals
from attention_lab.run.sweep_summary import write_summary


def stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def full_error_requested() -> bool:
    return os.environ.get("HYDRA_FULL_ERROR") == "1"


def resumed_config(cfg: DictConfig) -> tuple[DictConfig, resuming.ResumePlan]:
    """The config of the run being resumed. Checked again now that this process holds the run dir's lock: the
    run dir is data, and it may have changed since the command line was checked."""
    hydra_cfg = HydraConfig.get()
    plan = resuming.plan_resume(str(cfg.resume), [str(o) for o in hydra_cfg.overrides.task])
    main = next(source for source in hydra_cfg.runtime.config_sources if source.provider == "main")
    config_dir = Path(str(main.path).removeprefix("file://"))
    return resuming.compose_resumed(plan, hydra_cfg.job.config_name, config_dir), plan


class RunTask:
    """Runs ``train`` for one Hydra job and records how it ended."""

    def __init__(self, cfg: DictConfig) -> None:
        hydra_cfg = HydraConfig.get()
        self.cfg = cfg
        self.multirun = hydra_cfg.mode == RunMode.MULTIRUN
        self.run_dir = Path(hydra_cfg.runtime.output_dir)
        self.job = int(hydra_cfg.job.num) if self.multirun else None
        self.overrides = [str(o) for o in hydra_cfg.overrides.task]
        self.where = f"job {self.job} ({' '.join(self.overrides)})" if self.multirun else str(self.run_dir)
        secondary = secondary_process()
        sweep_dir = Path(os.path.abspath(str(hydra_cfg.sweep.dir))) if self.multirun else None
        if cfg.get("resume") and (self.run_dir.parent / SUMMARY).is_file():
            sweep_dir = self.run_dir.parent  # a resumed sweep job: its row in the sweep summary is updated too
        self.sweep_dir = None if secondary else sweep_dir
        self.info = RunInfo(self.run_dir, enabled=not secondary)
        self.lock = None if secondary else RunDirLock(self.run_dir)

    def __call__(self) -> float | None:
        cfg = self.cfg
        with StopSignals() as stop:
            try:
                if self.lock is not None:
                    self.lock.acquire(f"resume={cfg.resume}" if cfg.get("resume") else f"hydra.run.dir={self.run_dir}")
                plan = None
                if cfg.get("resume"):
                    cfg, plan = resumed_config(cfg)
                elif self.multirun:  # a single run was checked before its dir existed; sweep jobs are not
                    from attention_lab.run.preflight import check_run

                    check_run(cfg)
                # A resumed run keeps the name its first attempt had: the same TensorBoard run, continued.
                cfg.run_name = run_name(plan.saved if plan else self.overrides)
                self.info.begin(job=self.job, overrides=plan.overrides if plan else self.overrides, resume=bool(plan))
                if plan is not None and self.lock is not None:
                    resuming.record(plan, cfg)
                from attention_lab.train import train  # the heavy imports come after the checks

                metrics = train(cfg, stop)
            except BaseException as err:  # noqa: BLE001 - every way out is recorded
                return self.fail(err, stop)
            finally:
                if self.lock is not None:
                    self.lock.release()
        self.end("ok")
        return metrics.get(cfg.optimized_metric)

    def end(self, status: str, error: str | None = None) -> None:
        if self.info.data:
            self.info.end(status, error)
        if self.sweep_dir is not None:
            write_summary(self.sweep_dir)

    def fail(self, err: BaseException, stop: StopSignals) -> None:
        if isinstance(err, ConfigError) and not self.info.data:
            # Rejected before the run started: the run dir's record stays as it was.
            if self.multirun:
                self.info.begin(job=self.job, overrides=self.overrides, resume=False)
            else:
                stderr(f"error: {describe(err)}")
                sys.exit(1)
        if isinstance(err, TrainingInterrupted) or stop.signum is not None or isinstance(err, KeyboardInterrupt):
            self.interrupted(err, stop)
        message = describe(err, self.overrides)
        if not expected_error(err):
            (self.run_dir / TRACEBACK).write_text("".join(traceback.format_exception(err)))
            message += f" (traceback in {self.run_dir / TRACEBACK}; HYDRA_FULL_ERROR=1 prints it)"
        self.end("failed", message)
        if full_error_requested():
            traceback.print_exception(err)
        if self.multirun:
            stderr(f"error: {self.where} failed: {message}")
            return None
        stderr(f"error: {message}")
        sys.exit(1)

    def interrupted(self, err: BaseException, stop: StopSignals) -> None:
        if stop.aborted or (isinstance(err, KeyboardInterrupt) and stop.signum is None):
            signum, what = signal.SIGINT, "aborted by Ctrl-C, without saving"
        elif isinstance(err, TrainingInterrupted):
            signum, what = err.signum, str(err)
        else:  # Lightning ended the run itself after our signal (SIGTERM during validation)
            signum = stop.signum or signal.SIGINT
            what = f"{signal.Signals(signum).name}: stopped; the last checkpoint saved is kept"
        self.end("interrupted", what)
        rest = "; the sweep stops here (later jobs did not run)" if self.multirun else ""
        stderr(f"interrupted: {self.where}: {what}; continue with: python scripts/train.py resume={self.run_dir}{rest}")
        sys.exit(128 + signum)


def run_task(cfg: DictConfig) -> float | None:
    """The body of the ``@hydra.main`` task function."""
    return RunTask(cfg)()
