"""The failure policy of the task function, in one place (as lightning-hydra-template's ``task_wrapper``).

Every run ends in a recorded state in ``<run dir>/run_info.json``: ok, failed (one-line error; a traceback
file for bugs) or interrupted (a signal; exit status 128 + signal, with the command that continues the run).
A single run exits with one ``error:`` line; a failed sweep job is recorded and the sweep goes on. An error that
ends one of the run's other threads (TensorBoard's event writers) is no exception: it is kept instead of printed
(:mod:`.thread_errors`), its traceback goes to the traceback file, and the run fails with it in one line.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from attention_lab.callbacks.signals import StopSignals
from attention_lab.errors import ConfigError, TrainingInterrupted
from attention_lab.names import natural
from attention_lab.records.commands import script_command
from attention_lab.records.escape import console
from attention_lab.records.files import (
    CHECKPOINTS,
    LAST_CHECKPOINT,
    RUN_INFO,
    SAVED_CONFIG,
    SAVED_OVERRIDES,
    SUMMARY,
    TRACEBACK,
    save_yaml,
    secondary_process,
)
from attention_lab.records.run_record import RunInfo, RunStatus
from attention_lab.run.cli import full_error_requested
from attention_lab.run.describe import describe, expected_error, unwritable
from attention_lab.run.overrides import override_key, overrides_as_typed, run_name
from attention_lab.run.run_info import RunDirBusy, RunDirLock, RunDirTaken, RunInfoWriter
from attention_lab.run.sweep_summary import record_refusal, write_summary
from attention_lab.run.thread_errors import ThreadErrors

if TYPE_CHECKING:  # a plain run imports neither: only a resume or a resumed sweep's job needs them
    from attention_lab.run.resume import ResumePlan
    from attention_lab.run.sweep_resume import JobPlan


def stderr(line: str) -> None:
    """One console line of a run or job: it names overrides and errors, which a resumed sweep read from records."""
    sys.stderr.write(console(line) + "\n")
    sys.stderr.flush()


def resumed_config(resume: str) -> tuple[DictConfig, ResumePlan, str]:
    """The config of the run being resumed (``resume``: its dir), a new one composed from its saved overrides, the
    plan it was composed by, and the accelerator it trains on: composed once for the run, and checked whole before
    anything in the dir changes (the command line's checks read the record and leave its composition to this)."""
    from attention_lab.run.preflight import checked_resume, main_config_dir

    hydra_cfg = HydraConfig.get()
    return checked_resume(resume, overrides_as_typed(hydra_cfg, "task"), hydra_cfg.job.config_name,
                          main_config_dir(hydra_cfg))


def disk_error(error: BaseException) -> OSError | None:
    """The write that the filesystem refused (full, or read-only) behind ``error``: the error itself, or the one it
    was raised from (Lightning's TensorBoard logger raises a ValueError from its event writer's failed write)."""
    for cause in (error, error.__cause__):
        if isinstance(cause, OSError) and unwritable(cause):
            return cause
    return None


def interruption(error: BaseException, stop: StopSignals) -> bool:
    """Whether the run ended because a signal stopped it."""
    return isinstance(error, (TrainingInterrupted, KeyboardInterrupt)) or stop.signum is not None


def record_unchanged(resume: str, plan: ResumePlan) -> bool:
    """Whether the resumed run's record still holds what its config was composed from, read again now that this
    process holds the run dir's lock (the run dir is data, and it may have changed since); raises ConfigError for
    a record that can no longer be resumed (a run that finished meanwhile)."""
    from attention_lab.run.resume import plan_resume

    return plan_resume(resume, plan.extra).overrides == plan.overrides


class RunTask:
    """Runs ``train`` for one Hydra job and records how it ended."""

    def __init__(self, cfg: DictConfig) -> None:
        hydra_cfg = HydraConfig.get()
        self.cfg = cfg
        self.multirun = hydra_cfg.mode == RunMode.MULTIRUN
        self.run_dir = Path(hydra_cfg.runtime.output_dir)
        # A job's number is its dir's name: a resumed Optuna sweep numbers its new jobs after the existing ones.
        number = natural(self.run_dir.name)
        self.job = (int(hydra_cfg.job.num) if number is None else number) if self.multirun else None
        self.overrides = overrides_as_typed(hydra_cfg, "task")
        self.resumed_sweep = self.multirun and bool(cfg.get("resume"))
        if self.resumed_sweep:  # resume=<sweep dir>: the job's own overrides are the rest
            self.overrides = [o for o in self.overrides if override_key(o) != "resume"]
        self.owns_dir = False  # this process holds the run dir's lock, and the dir is this run's
        self.where = f"job {self.job} ({' '.join(self.overrides)})" if self.multirun else str(self.run_dir)
        secondary = secondary_process()
        sweep_dir = Path(os.path.abspath(str(hydra_cfg.sweep.dir))) if self.multirun else None
        if cfg.get("resume") and (self.run_dir.parent / SUMMARY).is_file():
            sweep_dir = self.run_dir.parent  # a resumed sweep job: its row in the sweep summary is updated too
        self.sweep_dir = None if secondary else sweep_dir
        self.info_writer = RunInfoWriter(self.run_dir, enabled=not secondary)
        self.lock = None if secondary else RunDirLock(self.run_dir)
        self.threads = ThreadErrors()  # what ends the run's other threads, while it runs

    def __call__(self) -> float | None:
        cfg = self.cfg
        OmegaConf.set_readonly(cfg, True)  # the config is input: what the run decides goes in its RunContext
        with StopSignals() as stop, self.threads:
            try:
                job = self.resumed_job(cfg)
                if job is not None and job.kept:  # before the lock: not one byte of an ok job changes
                    self.forget_refusal()  # its dir holds its own run (job_plan checked): a refusal was another's
                    stderr(f"{self.where}: ok, kept as it is")
                    return job.metric
                resume = cfg.get("resume") if job is None else \
                    str(self.run_dir) if job.continued else None
                # resume=<run dir> (or a sweep's job that continues from its own dir): composed and checked before
                # the lock, so that a refused resume changes nothing in the dir.
                resumed = resumed_config(str(resume)) if resume else None
                if self.lock is not None:
                    self.lock.acquire(f"resume={cfg.resume}" if cfg.get("resume") else f"hydra.run.dir={self.run_dir}")
                    self.claim_job_dir(job)
                if job is not None and job.restarted:
                    self.restart(cfg)
                plan = None
                if resumed is not None:
                    if not record_unchanged(str(resume), resumed[1]):
                        resumed = resumed_config(str(resume))
                    cfg, plan, accelerator = resumed
                else:  # a single run was checked whole by the command line's checks, and its accelerator is
                    # resolved again here (a Hydra callback hands nothing to the task); a sweep checked its jobs'
                    # config rules, and each job's data and machine are checked here, as the job runs
                    from attention_lab.run.preflight import accelerator_of, check_run

                    accelerator = check_run(cfg) if self.multirun else accelerator_of(cfg)
                from attention_lab.train import RunContext, train  # the heavy imports come after the checks

                context = RunContext(
                    stop=stop, accelerator=accelerator,
                    # A resumed run keeps the name its first attempt had: the same TensorBoard run, continued.
                    name=run_name(plan.saved if plan else self.overrides),
                    # HParams columns beside every knob: what the sweep varies (a single run: none more).
                    shown_hparams=self.swept_keys(),
                    resume_from=self.run_dir if plan else None,  # a resumed run's dir is its own (hydra.run.dir)
                    run_dir=self.run_dir)
                self.info_writer.begin(job=self.job, overrides=plan.overrides if plan else self.overrides,
                                       resume=bool(plan) or job is not None)  # a resumed sweep's job: attempts go on
                if plan is not None and self.lock is not None:
                    from attention_lab.run.resume import record

                    record(plan, cfg)
                metrics = train(cfg, context)
            except BaseException as err:  # noqa: BLE001 - every way out is recorded
                return self.fail(err, stop)
            finally:
                if self.lock is not None:
                    self.lock.release()
            self.threads.settle()
            failed = self.threads.first()
            if failed is not None:  # training ended, and a thread it started did not: an event writer's last write
                return self.fail(failed.error, stop)
        try:
            self.end(RunStatus.OK)
        except OSError as error:
            if not unwritable(error):
                raise
            self.cannot_write(error)
        return metrics.get(cfg.optimized_metric)

    def swept_keys(self) -> tuple[str, ...]:
        """What the sweep varies (a single run: nothing)."""
        if not self.multirun:
            return ()
        from attention_lab.run.sweep_jobs import swept_keys

        return tuple(swept_keys(self.sweep_dir, HydraConfig.get().sweeper.get("params")))

    def resumed_job(self, cfg: DictConfig) -> JobPlan | None:
        """What this job of a resumed sweep does (kept, continued or restarted); None for any other run."""
        if not self.resumed_sweep:
            return None
        from attention_lab.run.sweep_resume import job_plan

        return job_plan(self.run_dir, self.overrides, str(cfg.optimized_metric))

    def claim_job_dir(self, job: JobPlan | None) -> None:
        """A sweep job trains only in a dir that holds no other job's run (a resumed job: its own)."""
        previous = RunInfo.read(self.run_dir / RUN_INFO)
        if self.multirun and job is None and previous is not None and (
                previous.job != self.job or previous.overrides != self.overrides):
            raise RunDirTaken(f"{self.run_dir} already holds the run of job {previous.job} "
                              f"({' '.join(previous.overrides)}), which is left as it is; two jobs of "
                              "the sweep have the same dir (see hydra.sweep.subdir)")
        self.owns_dir = True
        self.forget_refusal()

    def forget_refusal(self) -> None:
        """The job runs in, or keeps, its own dir: its row in the summary is its run's again."""
        if self.sweep_dir is not None and self.job is not None:
            record_refusal(self.sweep_dir, self.job, self.overrides, None)

    def restart(self, cfg: DictConfig) -> None:
        """A failed or never-started job of a resumed sweep trains again: the failed attempt's files are set
        aside, and the job's .hydra/ record is written (Hydra writes none for a resumed sweep's jobs): the config
        of a run that is not resumed."""
        from attention_lab.run.sweep_resume import set_aside

        set_aside(self.run_dir)
        hydra_dir = self.run_dir / SAVED_CONFIG.parent
        hydra_dir.mkdir(exist_ok=True)
        save_yaml(OmegaConf.merge(cfg, {"resume": None}), self.run_dir / SAVED_CONFIG)
        save_yaml(HydraConfig.instance().cfg, hydra_dir / "hydra.yaml")
        save_yaml(OmegaConf.create(self.overrides), self.run_dir / SAVED_OVERRIDES)

    def end(self, status: RunStatus, error: str | None = None) -> None:
        if self.info_writer.info is not None:
            self.info_writer.end(status, error)
        if self.sweep_dir is not None:
            write_summary(self.sweep_dir)

    def fail(self, err: BaseException, stop: StopSignals) -> None:
        if not interruption(err, stop):  # a thread whose error ended the run has reported it (thread_errors.py)
            self.threads.settle()
        refused = disk_error(err)
        if refused is not None:
            with contextlib.suppress(OSError):  # a record may still fit where a checkpoint did not
                if self.info_writer.info is not None:
                    self.write_traceback(None)  # the threads' that failed, if any: a full disk is no bug
                    self.end(RunStatus.FAILED, describe(err))
            self.cannot_write(refused)
        try:
            return self.record_failure(err, stop)
        except OSError as error:  # recording the failure failed in turn: the disk is full, or read-only
            if not unwritable(error):
                raise
            self.cannot_write(error)

    def cannot_write(self, error: OSError) -> NoReturn:
        """The disk is full or read-only: the run stops in one line (no traceback, which could not be written
        either). A sweep stops as a whole, as its next jobs would fail the same way; a resume continues it."""
        if self.multirun:
            sweep_dir = self.sweep_dir or self.run_dir.parent
            stderr(f"error: {self.where} stopped the sweep: {describe(error)}; free some space (or make the dir "
                   f"writable), then continue it with: {script_command('train.py', f'resume={sweep_dir}')}")
        else:
            stderr(f"error: {describe(error)}; free some space (or make the dir writable), then run it again")
        sys.exit(1)

    def record_failure(self, err: BaseException, stop: StopSignals) -> None:
        if isinstance(err, ConfigError) and self.info_writer.info is None:
            # Rejected before the run started: the run dir's record stays as it was.
            if self.multirun and not self.owns_dir:  # the dir is another run's: nothing is written there
                stderr(f"error: {self.where} failed: {describe(err)}")
                if self.sweep_dir is not None and not isinstance(err, RunDirBusy):
                    # The summary counts it as failed, in place of the run its dir holds. Not when another process
                    # trains in the dir: that process records how the job ends, and a refusal would outlive it.
                    record_refusal(self.sweep_dir, self.job, self.overrides, describe(err))
                return None
            if self.multirun:
                self.info_writer.begin(job=self.job, overrides=self.overrides, resume=self.resumed_sweep)
            else:
                stderr(f"error: {describe(err)}")
                sys.exit(1)
        if interruption(err, stop):
            return self.interrupted(err, stop)
        message = describe(err, self.overrides)
        written = self.write_traceback(None if expected_error(err) else err)
        if written:
            message += f" (traceback in {self.run_dir / TRACEBACK}; HYDRA_FULL_ERROR=1 prints it)"
        self.end(RunStatus.FAILED, message)
        if full_error_requested():
            if written:
                sys.stderr.write(written)
            else:
                traceback.print_exception(err)
        if self.multirun:
            stderr(f"error: {self.where} failed: {message}")
            return None
        stderr(f"error: {message}")
        sys.exit(1)

    def write_traceback(self, err: BaseException | None) -> str:
        """Writes the run's traceback file, when there is a traceback to write: ``err``'s (a bug's; None: the
        error is no bug) and those of the threads that an error ended; returns what it wrote ("": nothing)."""
        text = self.threads.traceback_of(err)
        if text:
            (self.run_dir / TRACEBACK).write_text(text)
        return text

    def interrupted(self, err: BaseException, stop: StopSignals) -> None:
        if stop.aborted or (isinstance(err, KeyboardInterrupt) and stop.signum is None):
            signum, what = signal.SIGINT, "aborted by Ctrl-C, without saving"
        elif isinstance(err, TrainingInterrupted):
            signum, what = err.signum, str(err)
        else:  # Lightning ended the run itself after our signal (SIGTERM during validation)
            signum = stop.signum or signal.SIGINT
            kept = "the last checkpoint saved is kept" if (self.run_dir / CHECKPOINTS / LAST_CHECKPOINT).is_file() \
                else "no checkpoint had been saved yet"
            what = f"{signal.Signals(signum).name}: stopped; {kept}"
        with contextlib.suppress(OSError):  # a thread that failed meanwhile: its traceback, if it fits
            self.write_traceback(None)
        self.end(RunStatus.INTERRUPTED, what)
        if self.multirun:  # the sweep is continued as a whole: this job, and those that did not run yet
            where = f"resume={self.sweep_dir or self.run_dir.parent} (the whole sweep)"
        else:
            where = f"resume={self.run_dir}"
        stderr(f"interrupted: {self.where}: {what}; continue with: {script_command('train.py')} {where}")
        if self.multirun and os.environ.get("SUBMITIT_EXECUTOR") == "slurm":
            # A SLURM job (scancel, its time limit) ends alone: it returns, so that submitit reports a result and
            # the sweep ends with its summary instead of waiting for sacct to notice a job that gave none.
            return None
        sys.exit(128 + signum)


def run_task(cfg: DictConfig) -> float | None:
    """The body of the ``@hydra.main`` task function."""
    return RunTask(cfg)()
