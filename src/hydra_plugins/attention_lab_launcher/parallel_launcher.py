"""Local parallel jobs, each in a process of its own (``hydra/launcher=parallel``).

Why not hydra-joblib-launcher: loky breaks the whole pool when one worker dies (``TerminatedWorkerError``), so
one job killed by the out-of-memory killer takes the healthy jobs down with it, and a SIGTERM to the sweep leaves
its workers training as orphans. Here each job is one child process, at most ``n_jobs`` at once, forked from a
``forkserver`` that imported the ``preload`` modules (torch, Lightning) once: a job neither shares the parent's
state beyond what is pickled nor pays the imports again.

- a child that dies without a result (SIGKILL) fails only its job: the Hydra callbacks' ``on_job_end`` gets a
  failed JobReturn (attention_lab's SweepSummary records "killed by SIGKILL" in the job's run_info.json), and
  the sweeper gets ``None``, as attention_lab's task function returns for a failed job, so the sweep goes on;
- SIGTERM or SIGINT to the sweep's main process is forwarded as SIGTERM to the running children, which stop
  at the end of their step, checkpoint and record their jobs as interrupted; no new job starts, and the main
  process exits 128 + signal once they have ended;
- when the main process dies without a word (SIGKILL), the children notice (see :mod:`.lifeline`) and stop
  as on SIGTERM; the fork server exits after them. The jobs that had not started have no dir yet: a resume of
  the sweep trains them, as it continues the interrupted ones.
"""

# No `from __future__ import annotations`: Hydra executes plugin modules outside sys.modules while scanning,
# where dataclasses cannot resolve string annotations.
import logging
import multiprocessing
import os
import signal
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from pathlib import Path
from typing import Any

import cloudpickle
from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.plugins import Plugins
from hydra.core.singleton import Singleton
from hydra.core.utils import JobReturn, JobStatus, configure_log, filter_overrides, run_job, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf, open_dict, read_write

from attention_lab.records.escape import console
from hydra_plugins.attention_lab_launcher.lifeline import watch_launcher

log = logging.getLogger(__name__)


PRELOAD = ("attention_lab.train",)  # what every job imports: torch, Lightning and the lab
# Imported in the fork server after the preload modules, whatever they are: Hydra's plugin registry built and the
# imports frozen out of the garbage collector's reach, once for every job (see the module).
FORK_SERVER_SETUP = "attention_lab.run.fork_server"


@dataclass
class ParallelLauncherConf:
    _target_: str = "hydra_plugins.attention_lab_launcher.parallel_launcher.ParallelLauncher"
    n_jobs: int = -1  # jobs running at once; -1 = one per CPU core (joblib's meaning)
    preload: list[str] = field(default_factory=lambda: list(PRELOAD))  # imported once, before the jobs fork


# The schema of configs/hydra/launcher/parallel.yaml: n_jobs=two fails at compose time. Named as the lab names its
# schemas (attention_lab.config.SCHEMA_SUFFIX), so that --help lists parallel alone.
ConfigStore.instance().store(group="hydra/launcher", name="parallel_schema", node=ParallelLauncherConf,
                             provider="attention_lab")


class JobProcessDied(Exception):
    """The job's process ended without a result: killed by a signal (the OOM killer sends SIGKILL) or crashed."""

    def __init__(self, exitcode: int | None) -> None:
        self.exitcode = exitcode
        if exitcode is not None and exitcode < 0:
            how = f"was killed by {signal.Signals(-exitcode).name}"
            hint = " (as by the out-of-memory killer)" if -exitcode == signal.SIGKILL else ""
        else:
            how, hint = f"exited with status {exitcode} without reporting a result", ""
        super().__init__(f"the job's process {how}{hint}")


def job_config(hydra_context: HydraContext, config: DictConfig, overrides: Sequence[str], num: int) -> DictConfig:
    """The job's config, with its number and output dir, as Hydra's own launchers and ``run_job`` make it."""
    with warnings.catch_warnings():  # the sweeper composed this job's config before: its warnings were shown
        warnings.simplefilter("ignore")
        sweep_config = hydra_context.config_loader.load_sweep_config(config, list(overrides))
    with open_dict(sweep_config):
        sweep_config.hydra.job.id = f"{sweep_config.hydra.job.name}_{num}"
        sweep_config.hydra.job.num = num
    HydraConfig.instance().set_config(sweep_config)  # ${hydra.job.num} in the subdir reads it
    output_dir = Path(str(OmegaConf.select(sweep_config, "hydra.sweep.dir")),
                      str(OmegaConf.select(sweep_config, "hydra.sweep.subdir")))
    with read_write(sweep_config.hydra.runtime), open_dict(sweep_config.hydra.runtime):
        sweep_config.hydra.runtime.output_dir = str(output_dir.absolute())
    HydraConfig.instance().set_config(sweep_config)  # a copy: set again, with the output dir
    return sweep_config


def ended_without_value(overrides: Sequence[str]) -> JobReturn:
    """A job that ended without a value for the sweeper, as the lab's task function ends a failed job."""
    ret = JobReturn(overrides=list(overrides), status=JobStatus.COMPLETED)
    ret.return_value = None
    return ret


def report(result: Connection, ret: JobReturn, overrides: list[str]) -> None:
    """Send the job's return to the launcher, or the plain one when it cannot be pickled."""
    for value in (ret, ended_without_value(overrides)):
        try:
            result.send(value)
            return
        except OSError:  # the launcher is gone: nobody to tell, the job's records say how it ended
            return
        except Exception:  # noqa: BLE001 - an unpicklable return value or exception: the job still ended
            continue


def with_plugins(singleton_state: dict[str, Any]) -> dict[str, Any]:
    """The sweep's Hydra state with this process's plugin registry in it: ``Singleton.get_state`` leaves the registry
    out and ``set_state`` rebuilds it, a scan of every plugin module in every job, unless the state holds one. The
    fork server built it once (FORK_SERVER_SETUP); a process without it builds it here."""
    return {**singleton_state, "instances": {Plugins: Plugins.instance(), **singleton_state["instances"]}}


def run_in_child(payload: bytes, num: int, overrides: list[str], result: Connection, lifeline: Connection,
                 launcher_pid: int) -> None:
    """The child process: one job through ``run_job`` (as hydra-joblib-launcher's ``execute_job`` does)."""
    # Ctrl-C in a terminal reaches every process of the group; the parent passes it on as SIGTERM. Until the task
    # function installs its own handlers, a job starting up ignores it rather than dying with a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch_launcher(lifeline, launcher_pid)
    setup_globals()
    hydra_context, config, task_function, singleton_state = cloudpickle.loads(payload)
    Singleton.set_state(with_plugins(singleton_state))
    code = 0
    try:
        ret = run_job(hydra_context=hydra_context, task_function=task_function,
                      config=job_config(hydra_context, config, overrides, num),
                      job_dir_key="hydra.sweep.dir", job_subdir_key="hydra.sweep.subdir")
    except SystemExit as stop:  # the task function ended the process (an interrupted run: 128 + signal)
        code = stop.code if isinstance(stop.code, int) else 1
        ret = ended_without_value(overrides)
    report(result, ret, overrides)
    result.close()
    sys.exit(code)


class StopForwarding:
    """While the jobs run: SIGTERM/SIGINT to this process are passed on as SIGTERM to the live children."""

    def __init__(self, children: dict[Connection, tuple[int, Any, Connection]]) -> None:
        self.children, self.signum, self.previous = children, None, {}

    def handler(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
            log.warning("%s received: stopping the running jobs (each saves a checkpoint); no new job starts",
                        signal.Signals(signum).name)
        for _, process, _ in self.children.values():
            if process.is_alive():
                os.kill(process.pid, signal.SIGTERM)

    def __enter__(self) -> "StopForwarding":
        self.previous = {s: signal.signal(s, self.handler) for s in (signal.SIGTERM, signal.SIGINT)}
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self.previous.items():
            signal.signal(signum, previous)


class ParallelLauncher(Launcher):
    def __init__(self, n_jobs: int = -1, preload: Sequence[str] = PRELOAD) -> None:
        super().__init__()
        self.n_jobs = n_jobs if n_jobs > 0 else os.cpu_count() or 1
        self.preload = list(preload)
        self.config: DictConfig | None = None
        self.hydra_context: HydraContext | None = None
        self.task_function: TaskFunction | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.config, self.hydra_context, self.task_function = config, hydra_context, task_function

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        setup_globals()
        assert self.config is not None and self.hydra_context is not None and self.task_function is not None
        configure_log(self.config.hydra.hydra_logging, self.config.hydra.verbose)
        sweep_dir = Path(str(self.config.hydra.sweep.dir))
        sweep_dir.mkdir(parents=True, exist_ok=True)
        log.info("Launching %d jobs, %d at a time, each in its own process; sweep output dir: %s",
                 len(job_overrides), self.n_jobs, sweep_dir)
        payload = cloudpickle.dumps((self.hydra_context, self.config, self.task_function, Singleton.get_state()))
        # Read by torch when the fork server imports it: the jobs share the cores (the `threads` knob, when set,
        # still wins inside each run). This process trains nothing itself.
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(var, str(max(1, (os.cpu_count() or 1) // self.n_jobs)))
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload([*self.preload, FORK_SERVER_SETUP])
        pending = list(enumerate(job_overrides))
        returns: list[JobReturn | None] = [None] * len(job_overrides)
        running: dict[Connection, tuple[int, Any, Connection]] = {}
        with StopForwarding(running) as stop:
            while running or (pending and stop.signum is None):
                while pending and len(running) < self.n_jobs and stop.signum is None:
                    idx, overrides = pending.pop(0)
                    log.info("\t#%d : %s", initial_job_idx + idx, console(" ".join(filter_overrides(overrides))))
                    receiver, sender = context.Pipe(duplex=False)
                    lifeline, keeper = context.Pipe(duplex=False)  # this process holds the only writer: see lifeline
                    process = context.Process(target=run_in_child, args=(
                        payload, initial_job_idx + idx, list(overrides), sender, lifeline, os.getpid()))
                    process.start()
                    sender.close()  # the child holds the only writer: its death reads as end of file here
                    lifeline.close()
                    running[receiver] = (idx, process, keeper)
                for receiver in wait(list(running)):
                    idx, process, keeper = running.pop(receiver)
                    returns[idx] = self.collect(receiver, process, initial_job_idx + idx, job_overrides[idx])
                    keeper.close()  # after the child has ended: closed earlier, the child would stop itself
        if stop.signum is not None:
            sys.exit(128 + stop.signum)
        return [ret for ret in returns if ret is not None]

    def collect(self, receiver: Connection, process: Any, num: int, overrides: Sequence[str]) -> JobReturn:
        try:
            ret = receiver.recv()
        except (EOFError, OSError):
            ret = None
        receiver.close()
        process.join()
        if isinstance(ret, JobReturn):
            return ret
        return self.died(JobProcessDied(process.exitcode), num, overrides)

    def died(self, error: JobProcessDied, num: int, overrides: Sequence[str]) -> JobReturn:
        """Record a job whose process died: the callbacks see it failed; the sweeper gets None and goes on."""
        assert self.config is not None and self.hydra_context is not None
        config = job_config(self.hydra_context, self.config, overrides, num)
        failed = JobReturn(overrides=list(overrides), cfg=config, hydra_cfg=config, status=JobStatus.FAILED)
        failed.return_value = error  # what the job's return value re-raises for the callbacks
        self.hydra_context.callbacks.on_job_end(config=config, job_return=failed)
        sys.stderr.write(console(f"error: job {num} ({' '.join(filter_overrides(overrides))}) failed: {error}") + "\n")
        return ended_without_value(overrides)
