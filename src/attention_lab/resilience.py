"""What keeps scripts/train.py safe to leave running and to type at: one-line errors, run dirs that are
never reused, resumable runs, and sweeps that record a failed job instead of stopping.

- :func:`cli` wraps the ``@hydra.main`` entry: any error becomes one ``error: ...`` line on stderr and exit
  status 1 (``HYDRA_FULL_ERROR=1`` shows the traceback instead); ``resume=<run dir>`` is rewritten into
  that run's own overrides plus ``hydra.run.dir=<run dir>``.
- :class:`RunGuard` (a Hydra callback) checks a run's config before its run dir exists, and refuses a run
  dir or sweep dir that already holds a run or a sweep: nothing is overwritten.
- :func:`run_task` is the task function's body: preflight checks, training, ``<run dir>/run_info.json``.
  In a multirun a failed job is recorded and the other jobs still run.
- :class:`SweepSummary` (a Hydra callback) keeps ``<sweep dir>/sweep_summary.json`` (and ``.csv``) up to date.

This module stays light (no torch or lightning at import): config errors are reported within a second.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import difflib
import json
import logging
import os
import re
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from attention_lab.config import ConfigError, validate

log = logging.getLogger(__name__)

RUN_INFO = "run_info.json"  # status, error, overrides, wall time of one run (or sweep job)
METRICS = "metrics.json"  # final metrics only: byte-identical for the same config and seed on CPU
SUMMARY = "sweep_summary.json"
SUMMARY_CSV = "sweep_summary.csv"
LAST_CHECKPOINT = Path("checkpoints") / "last.ckpt"
TRACEBACK = "traceback.txt"
# cli() sets HYDRA_FULL_ERROR=1 so that Hydra hands every error to us; the user's own choice is kept here
# (and inherited by launcher workers).
_USER_FULL_ERROR = "ATTENTION_LAB_FULL_ERROR"


# ----------------------------------------------------------------------------------------------------------
# Outcomes of a training run that are not bugs


class TrainingInterrupted(Exception):
    """SIGINT/SIGTERM: the run stopped at the end of a step, after saving ``checkpoint`` (if any)."""

    def __init__(self, signum: int, step: int, checkpoint: Path | None) -> None:
        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        name = signal.Signals(signum).name
        saved = f"checkpoint saved to {checkpoint}" if checkpoint else "no checkpoint (training had not started)"
        super().__init__(f"{name} at step {step}: {saved}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM


class TrainingDiverged(Exception):
    """A nan/inf training loss: the run stopped before the bad update; ``checkpoint`` is the last good one."""

    def __init__(self, loss: float, step: int, checkpoint: Path | None, checkpoint_step: int | None) -> None:
        self.loss, self.step, self.checkpoint, self.checkpoint_step = loss, step, checkpoint, checkpoint_step
        if checkpoint is None:
            kept = "no checkpoint had been saved yet"
        else:
            at = f" (step {checkpoint_step})" if checkpoint_step is not None else ""
            kept = f"the last checkpoint, {checkpoint}{at}, is kept as it was"
        super().__init__(f"training diverged: the loss is {loss} at step {step}; stopped before updating the "
                         f"weights with it; {kept}; try a lower lr")


# ----------------------------------------------------------------------------------------------------------
# One-line error messages


def full_error_requested() -> bool:
    """True when the user asked for tracebacks (HYDRA_FULL_ERROR=1)."""
    value = os.environ.get(_USER_FULL_ERROR)
    return (value if value is not None else os.environ.get("HYDRA_FULL_ERROR", "0")) == "1"


def one_line(text: str, limit: int = 400) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


_KINDS = {"Integer": "an integer", "Float": "a number", "Boolean": "true or false", "String": "a string"}


def _validation_reason(err: BaseException) -> str:
    msg = str(getattr(err, "msg", None) or str(err).splitlines()[0])
    if m := re.match(r"Value '(.*)' of type '\w+' could not be converted to (\w+)", msg):
        return f"expected {_KINDS.get(m.group(2), m.group(2))}, got '{m.group(1)}'"
    if m := re.match(r"Invalid value '.*', expected one of \[(.*)\]", msg):
        return f"choose one of {m.group(1)}"
    if re.search(r"is not Optional", msg):
        return "it cannot be null"
    return one_line(msg)


def _did_you_mean(key: str, err: BaseException) -> str:
    node_type = getattr(err, "object_type", None)
    if not (isinstance(node_type, type) and dataclasses.is_dataclass(node_type)):
        return ""
    prefix, _, leaf = key.rpartition(".")
    match = difflib.get_close_matches(leaf, [f.name for f in dataclasses.fields(node_type)], n=1)
    return f"; did you mean {prefix + '.' if prefix else ''}{match[0]}?" if match else ""


def describe(err: BaseException) -> str:
    """One line for an error: `<setting>=<value> is invalid: <what is allowed>` where it can be said."""
    from hydra.errors import MissingConfigException, OverrideParseException
    from omegaconf.errors import ConfigAttributeError, ConfigKeyError, ValidationError

    if isinstance(err, (ConfigError, TrainingDiverged, TrainingInterrupted)):
        return one_line(str(err))
    text = str(err)
    if isinstance(err, MissingConfigException) and getattr(err, "missing_cfg_file", None):
        group, _, value = err.missing_cfg_file.rpartition("/")
        options = [o for o in (err.options or []) if not o.endswith("_schema")]
        if group and options:
            return f"{group}={value} is unknown: choose one of {', '.join(options)}"
        return one_line(text.split("\n\n")[0])
    if isinstance(err, OverrideParseException):
        lines = text.splitlines()
        quoted = re.search(r"override '(.*)'", lines[0])
        detail = lines[1].split(" expecting ")[0] if len(lines) > 1 else "syntax error"
        return (f"could not parse the override '{quoted.group(1) if quoted else text}': {detail}; "
                "write key=value, e.g. heads=3")
    cause = err.__cause__
    if (m := re.match(r"Error merging override (.+)", text)) and isinstance(cause, ValidationError):
        return f"{m.group(1)} is invalid: {_validation_reason(cause)}"
    if (m := re.match(r"Could not override '(.+?)'", text)) and isinstance(cause, (ConfigAttributeError, ConfigKeyError)):
        key = m.group(1)
        given = re.search(r"use \+(\S+)", text)
        return (f"{given.group(1) if given else key} is invalid: there is no setting '{key}'{_did_you_mean(key, cause)} "
                "(python scripts/train.py --help lists them)")
    if m := re.match(r"Could not delete from config. '(.+?)' does not exist", text):
        return f"~{m.group(1)} is invalid: there is no '{m.group(1)}' to delete"
    if m := re.match(r"Error merging override (.+)", text):
        return f"{m.group(1)} is invalid: {one_line(str(cause) if cause else text)}"
    if m := re.match(r"Error in call to target '(?:[\w.]+\.)?(\w+)':\s*\w+\((.*)\)\s*full_key: (\S+)", text, re.S):
        inner = m.group(2).strip().strip("'\"")  # hydra.utils.instantiate: `<target>: <Exception>('msg') full_key: x`
        return one_line(f"{m.group(3)} is invalid: {m.group(1)} rejected it: {inner}")
    message = getattr(err, "msg", None) or text
    return one_line(f"{type(err).__name__}: {message}" if message else type(err).__name__)


def _expected(err: BaseException) -> bool:
    """Errors that are about the input or the run, not bugs: no traceback file for them."""
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    return isinstance(err, (ConfigError, TrainingDiverged, HydraException, OmegaConfBaseException))


# ----------------------------------------------------------------------------------------------------------
# Entry point


_last_sweep: dict[str, Any] = {}  # set by SweepSummary.on_multirun_end in this process


def cli(main: Callable[[], Any]) -> None:
    """Run the ``@hydra.main`` function ``main`` with one-line errors and ``resume=`` support."""
    if _USER_FULL_ERROR not in os.environ:
        os.environ[_USER_FULL_ERROR] = "1" if os.environ.get("HYDRA_FULL_ERROR") == "1" else "0"
    full = full_error_requested()
    os.environ["HYDRA_FULL_ERROR"] = "1"  # Hydra re-raises instead of printing its multi-line report
    try:
        sys.argv[1:] = rewrite_resume_args(sys.argv[1:])
        main()
    except Rejected as rejected:
        if full:
            raise rejected.error from None
        sys.exit(f"error: {describe(rejected.error)}")
    except KeyboardInterrupt:
        if full:
            raise
        sys.stderr.write("interrupted (Ctrl-C)\n")
        sys.exit(130)
    except Exception as err:
        if full:
            raise
        sys.exit(f"error: {describe(err)}")
    if _last_sweep:
        counts, total, path = _last_sweep["counts"], _last_sweep["total"], _last_sweep["path"]
        tally = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "no jobs"
        if total - counts.get("ok", 0):
            sys.exit(f"error: sweep finished with {tally} (errors above and in {path}); "
                     "the other jobs kept their results")
        log.info("sweep finished: %s; summary: %s", tally, path)


def _is_override(arg: str) -> bool:
    return not arg.startswith("-") and ("=" in arg or arg.startswith("~"))


def _override_key(arg: str) -> str:
    return arg.split("=", 1)[0].lstrip("+~")


def _quote(value: str) -> str:
    if re.fullmatch(r"[\w/.:~+-]+", value):
        return value
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _read_json(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def _alive(info: dict[str, Any]) -> bool:
    if info.get("host") != socket.gethostname() or not info.get("pid"):
        return False
    try:
        os.kill(int(info["pid"]), 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def rewrite_resume_args(args: list[str]) -> list[str]:
    """``resume=<run dir> [more overrides]`` -> that run's saved overrides, the new ones, and
    ``resume=<abs dir> hydra.run.dir=<abs dir>``: the same config, continued in the same dir."""
    hits = [i for i, a in enumerate(args) if re.match(r"\+{0,2}resume=", a)]
    if not hits:
        return args
    value = args[hits[-1]].split("=", 1)[1].strip().strip("'\"")
    if value.lower() in ("", "null", "none"):
        return args
    if "-m" in args or "--multirun" in args:
        raise ConfigError(f"resume={value} is invalid with -m: resume one run at a time "
                          "(a sweep job too: resume=<sweep dir>/<job number>)")
    run_dir = Path(value).expanduser().resolve()
    saved_file = run_dir / ".hydra" / "overrides.yaml"
    if not saved_file.is_file():
        raise ConfigError(f"resume={value} is invalid: {run_dir} is not a run dir (no .hydra/overrides.yaml there)")
    extra = [a for i, a in enumerate(args)
             if _is_override(a) and i not in hits and _override_key(a) not in ("resume", "hydra.run.dir")]
    replaced = {_override_key(a) for a in extra} | {"resume"}  # a setting given again replaces the saved one
    saved = [str(o) for o in OmegaConf.load(saved_file) if _override_key(str(o)) not in replaced]
    info = _read_json(run_dir / RUN_INFO)
    if info.get("status") in ("running", "starting") and _alive(info):
        raise ConfigError(f"resume={value} is invalid: that run is still running (pid {info['pid']}); stop it first")
    if (run_dir / METRICS).exists() and not {_override_key(a) for a in extra} & {"max_steps", "max_epochs"}:
        raise ConfigError(f"resume={value} is invalid: that run already finished (see its {METRICS}); "
                          "to train it further, add a larger max_steps, e.g. max_steps=3000")
    others = [a for a in args if not _is_override(a)]
    return [*others, *saved, *extra, f"resume={_quote(str(run_dir))}", f"hydra.run.dir={_quote(str(run_dir))}"]


# ----------------------------------------------------------------------------------------------------------
# Checks before anything is created or imported


def resolve_accelerator(device: Any, preset: str | None = None) -> str:
    """Map the `device` knob (or a trainer preset's accelerator) to a Lightning accelerator, failing early
    when it isn't there."""
    import torch

    device = getattr(device, "value", device)
    mps = torch.backends.mps.is_available()
    if preset:
        if preset in ("gpu", "cuda") and not torch.cuda.is_available():
            raise ConfigError(f"trainer.accelerator={preset} is invalid: no CUDA GPU is visible to torch here; "
                              "use trainer=default (device=auto) or trainer=cpu")
        if preset == "mps" and not mps:
            raise ConfigError("trainer.accelerator=mps is invalid: Apple's MPS backend is not available here; "
                              "use trainer=default (device=auto) or trainer=cpu")
        return preset
    if device == "auto":
        if torch.cuda.is_available():
            return "gpu"
        return "mps" if mps else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda is invalid: no CUDA GPU is visible to torch here; use device=cpu or device=auto")
    if device == "mps" and not mps:
        raise ConfigError("device=mps is invalid: Apple's MPS backend is not available here; use device=cpu or device=auto")
    return {"cpu": "cpu", "cuda": "gpu", "mps": "mps"}[device]


def preflight(cfg: DictConfig) -> str:
    """Every check that needs no training: settings, device, corpus and task data. Returns the accelerator."""
    validate(cfg)
    from attention_lab.data.corpus import Vocabulary, read_sentences

    task = cfg.task
    sentences = read_sentences(task.corpus)  # before anything imports torch: a bad path fails at once
    accelerator = resolve_accelerator(cfg.device, cfg.trainer.get("accelerator"))
    from attention_lab.data.tasks import build_pairs

    build_pairs(task.name, Vocabulary.from_sentences(sentences), sentences, train_size=task.train_size,
                val_size=task.val_size, min_len=task.min_len, max_len=task.max_len, seed=cfg.seed)
    return accelerator


def secondary_process() -> bool:
    """A data-parallel worker other than the first: Lightning's DDP launcher re-runs this script for every
    local rank with the same run dir (LOCAL_RANK), as torchrun or SLURM tasks do (RANK, SLURM_PROCID).
    Such a worker neither claims the run dir nor writes run_info.json or sweep summaries."""
    return any(os.environ.get(var, "0").strip() not in ("", "0")
               for var in ("LOCAL_RANK", "NODE_RANK", "RANK", "SLURM_PROCID"))


def _select_dir(config: DictConfig, key: str) -> Path | None:
    try:
        value = OmegaConf.select(config, key)
    except Exception:  # e.g. a ${hydra:...} interpolation that needs the job's runtime config
        return None
    return Path(os.path.abspath(str(value))) if value else None


def claim_run_dir(run_dir: Path, resume: str | None) -> None:
    """Refuse a run dir that already holds a run (unless resuming it), then claim it atomically."""
    if resume:
        if Path(resume).expanduser().resolve() != run_dir.resolve():
            raise ConfigError(f"resume={resume} is invalid: it must be the run dir itself (hydra.run.dir={run_dir}); "
                              "use: python scripts/train.py resume=<run dir>")
        return
    taken = next((m for m in (RUN_INFO, METRICS, ".hydra", "checkpoints", SUMMARY) if (run_dir / m).exists()), None)
    if taken is None:
        run_dir.mkdir(parents=True, exist_ok=True)
        try:  # O_EXCL: of two runs given the same dir at the same moment, exactly one gets it
            fd = os.open(run_dir / RUN_INFO, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            taken = RUN_INFO
        else:
            with os.fdopen(fd, "w") as f:
                json.dump({"status": "starting", "pid": os.getpid(), "host": socket.gethostname()}, f)
            return
    raise ConfigError(f"hydra.run.dir={run_dir} is invalid: it already holds a run ({taken}), which is left as it is; "
                      f"choose a new dir, or continue that run with resume={run_dir}")


def claim_sweep_dir(sweep_dir: Path) -> None:
    taken = next((m for m in (SUMMARY, "multirun.yaml") if (sweep_dir / m).exists()), None)
    if taken is None:
        sweep_dir.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(sweep_dir / SUMMARY, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            taken = SUMMARY
        else:
            with os.fdopen(fd, "w") as f:
                json.dump(_summary_document(sweep_dir, []), f, indent=2)
            return
    raise ConfigError(f"hydra.sweep.dir={sweep_dir} is invalid: it already holds a sweep ({taken}), which is left "
                      "as it is; choose a new dir")


class Rejected(BaseException):
    """Carries an error out of a Hydra callback (Hydra turns a callback's Exception into a mere warning);
    cli() reports ``error`` in one line, or re-raises it under HYDRA_FULL_ERROR=1."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error


class RunGuard(Callback):
    """Hydra callback: the checks run before Hydra creates the run dir, so a rejected config leaves nothing
    behind; a dir that holds a run or a sweep is never reused."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            preflight(config)
            run_dir = _select_dir(config, "hydra.run.dir")
            if run_dir is not None and not secondary_process():
                claim_run_dir(run_dir, config.get("resume"))
        except Exception as err:
            raise Rejected(err) from err

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        try:
            if config.get("resume"):
                raise ConfigError(f"resume={config.resume} is invalid with -m: resume one run at a time")
            sweep_dir = _select_dir(config, "hydra.sweep.dir")
            if sweep_dir is not None and not secondary_process():
                claim_sweep_dir(sweep_dir)
        except Exception as err:
            raise Rejected(err) from err


# ----------------------------------------------------------------------------------------------------------
# Signals


class _StopRequest:
    signum: int | None = None
    handler: Callable[[int, Any], None] | None = None  # installed by graceful_signals


STOP = _StopRequest()


def stop_requested() -> int | None:
    """The signal (SIGINT/SIGTERM) received during training, if any."""
    return STOP.signum


@contextlib.contextmanager
def graceful_signals() -> Iterator[_StopRequest]:
    """SIGINT and SIGTERM set a flag instead of killing the process; the training loop checks it after each
    step (attention_lab.safety.GracefulStop), saves a checkpoint and stops. A second Ctrl-C aborts."""
    if threading.current_thread() is not threading.main_thread():
        yield STOP
        return

    def handler(signum: int, frame: Any) -> None:
        if STOP.signum is not None:
            if signum == signal.SIGINT:
                raise KeyboardInterrupt
            return
        STOP.signum = signum
        log.warning("%s received: stopping at the end of this step and saving checkpoints/last.ckpt "
                    "(Ctrl-C again aborts without saving)", signal.Signals(signum).name)

    previous = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    STOP.signum, STOP.handler = None, handler
    try:
        yield STOP
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
        STOP.signum, STOP.handler = None, None


# ----------------------------------------------------------------------------------------------------------
# run_info.json and the task function


def _now() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


def write_json(path: Path, data: Any) -> None:
    """Atomic: readers never see a half-written file."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


class RunInfo:
    """``<run dir>/run_info.json``: status (running | ok | failed | interrupted), error, overrides, wall time.
    Kept apart from metrics.json so that metrics.json only holds metrics (identical across reruns)."""

    def __init__(self, run_dir: Path, *, enabled: bool = True) -> None:
        self.path, self.enabled = run_dir / RUN_INFO, enabled
        self.previous = _read_json(self.path)
        self.data: dict[str, Any] = {}
        self.started = time.perf_counter()

    def begin(self, *, job: int | None, overrides: list[str], output_dir: Path, resume: bool) -> None:
        previous = self.previous if resume else {}
        self.data = {
            "status": "running", "error": None, "job": job if job is not None else previous.get("job"), "overrides": overrides, "output_dir": str(output_dir),
            "pid": os.getpid(), "host": socket.gethostname(), "started_at": _now(), "finished_at": None,
            "attempts": int(previous.get("attempts") or 0) + 1,
            "previous_wall_time_s": float(previous.get("wall_time_s") or 0.0), "wall_time_s": None,
        }
        if self.enabled:
            write_json(self.path, self.data)

    def end(self, status: str, error: str | None = None) -> None:
        elapsed = time.perf_counter() - self.started
        self.data.update(status=status, error=error, finished_at=_now(),
                         wall_time_s=round(self.data.get("previous_wall_time_s", 0.0) + elapsed, 2))
        if self.enabled:
            write_json(self.path, self.data)


def _stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def run_task(cfg: DictConfig) -> float | None:
    """Body of the Hydra task function. Run mode: errors exit with one line. Multirun: a failed job is
    recorded in its run_info.json and the sweep summary, reported in one line, and None is returned so that
    the sweeper goes on with the other jobs (Optuna marks that trial failed)."""
    hydra_cfg = HydraConfig.get()
    multirun = hydra_cfg.mode == RunMode.MULTIRUN
    run_dir = Path(hydra_cfg.runtime.output_dir)
    job = int(hydra_cfg.job.num) if multirun else None
    overrides = [str(o) for o in hydra_cfg.overrides.task]
    where = f"job {job} ({' '.join(overrides)})" if multirun else str(run_dir)
    sweep_dir = Path(os.path.abspath(str(hydra_cfg.sweep.dir))) if multirun else None
    if cfg.get("resume") and (run_dir.parent / SUMMARY).is_file():
        sweep_dir = run_dir.parent  # a resumed sweep job: its row in the sweep summary is updated too
    if secondary_process():
        sweep_dir = None
    info = RunInfo(run_dir, enabled=not secondary_process())
    info.begin(job=job, overrides=overrides, output_dir=run_dir, resume=bool(cfg.get("resume")))
    try:
        with graceful_signals():
            if multirun:  # a single run was checked by RunGuard before its dir existed; sweep jobs are not
                preflight(cfg)
            from attention_lab.train import train  # the heavy imports come after the checks

            value = train(cfg)
    except TrainingInterrupted as stop:
        info.end("interrupted", str(stop))
        if sweep_dir is not None:
            write_summary(sweep_dir)
        how = f"python scripts/train.py resume={run_dir}"
        rest = "; the sweep stops here (later jobs did not run)" if multirun else ""
        _stderr(f"interrupted: {where}: {stop}; continue with: {how}{rest}")
        sys.exit(stop.exit_code)
    except SystemExit as stop:
        if type(stop).__name__ != "SIGTERMException":
            raise
        # Lightning's own SIGTERM exit (several processes): it ends with status 0 and saves nothing.
        info.end("interrupted", "SIGTERM: stopped by Lightning, without saving a checkpoint")
        if sweep_dir is not None:
            write_summary(sweep_dir)
        _stderr(f"interrupted: {where}: SIGTERM; no checkpoint was saved")
        sys.exit(128 + signal.SIGTERM)
    except KeyboardInterrupt:
        info.end("interrupted", "aborted by a second Ctrl-C, without saving")
        if sweep_dir is not None:
            write_summary(sweep_dir)
        _stderr(f"interrupted: {where}: aborted without saving a checkpoint")
        sys.exit(130)
    except Exception as err:
        message = describe(err)
        if not _expected(err):
            (run_dir / TRACEBACK).write_text(traceback.format_exc())
            message += f" (traceback in {run_dir / TRACEBACK}; HYDRA_FULL_ERROR=1 prints it)"
        info.end("failed", message)
        if sweep_dir is not None and not multirun:
            write_summary(sweep_dir)
        if multirun:
            if full_error_requested():
                traceback.print_exc()
            _stderr(f"error: {where} failed: {message}")
            return None
        if full_error_requested():
            raise
        sys.exit(f"error: {message}")
    info.end("ok")
    if sweep_dir is not None and not multirun:
        write_summary(sweep_dir)
    return value


# ----------------------------------------------------------------------------------------------------------
# Sweep summary


def _summary_document(sweep_dir: Path, jobs: list[dict[str, Any]]) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for row in jobs:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    return {"sweep_dir": str(sweep_dir), "updated_at": _now(), "total": len(jobs), "counts": counts, "jobs": jobs}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # Windows: jobs of the basic launcher run one at a time anyway
        yield
        return
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def summary_rows(sweep_dir: Path, *, final: bool = False) -> list[dict[str, Any]]:
    """One row per job dir under sweep_dir that has a run_info.json, ordered by job number."""
    rows = []
    for info_path in [*sweep_dir.glob(f"*/{RUN_INFO}"), *sweep_dir.glob(f"*/*/{RUN_INFO}")]:
        info, job_dir = _read_json(info_path), info_path.parent
        status, error = info.get("status") or "running", info.get("error")
        if final and status in ("running", "starting"):  # the sweep is over: that job died without a word
            status, error = "failed", "the job ended without reporting a result (killed or crashed)"
        rows.append({
            "job": info.get("job"), "overrides": info.get("overrides") or [], "status": status, "error": error,
            "metrics": _read_json(job_dir / METRICS) if status == "ok" else {},
            "output_dir": str(job_dir), "wall_time_s": info.get("wall_time_s"),
        })
    rows.sort(key=lambda r: (r["job"] is None, r["job"] if r["job"] is not None else 0, r["output_dir"]))
    return rows


def write_summary(sweep_dir: Path, *, final: bool = False) -> dict[str, Any]:
    """(Re)write <sweep dir>/sweep_summary.json and .csv from the job dirs' run_info.json and metrics.json."""
    with _locked(sweep_dir / ".sweep_summary.lock"):
        rows = summary_rows(sweep_dir, final=final)
        document = _summary_document(sweep_dir, rows)
        write_json(sweep_dir / SUMMARY, document)
        metric_keys = sorted({key for row in rows for key in row["metrics"]})
        tmp = sweep_dir / f".{SUMMARY_CSV}.{os.getpid()}.tmp"
        with open(tmp, "w", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow(["job", "status", "error", "wall_time_s", "output_dir", "overrides", *metric_keys])
            for row in rows:
                writer.writerow([row["job"], row["status"], row["error"] or "", row["wall_time_s"], row["output_dir"],
                                 " ".join(row["overrides"]), *(row["metrics"].get(k, "") for k in metric_keys)])
        os.replace(tmp, sweep_dir / SUMMARY_CSV)
    return document


class SweepSummary(Callback):
    """Hydra callback: after every job of a multirun, and at its end, rewrites the sweep summary."""

    @staticmethod
    def _sweep_dir(config: DictConfig) -> Path:
        return _select_dir(config, "hydra.sweep.dir") or Path(config.hydra.runtime.output_dir).parent

    def on_job_end(self, config: DictConfig, job_return: Any, **kwargs: Any) -> None:
        if config.hydra.mode != RunMode.MULTIRUN or secondary_process():
            return
        try:
            self._record_job(config, job_return)
        except Exception:  # Hydra would only warn; say it plainly, and let the sweep go on
            log.exception("could not update the sweep summary")

    def _record_job(self, config: DictConfig, job_return: Any) -> None:
        job_dir = Path(config.hydra.runtime.output_dir)
        error = getattr(job_return, "_return_value", None)
        if isinstance(error, BaseException):  # raised past run_task: record it all the same
            info = _read_json(job_dir / RUN_INFO)
            info.update(status="failed", error=describe(error), job=int(config.hydra.job.num),
                        overrides=[str(o) for o in config.hydra.overrides.task], output_dir=str(job_dir))
            write_json(job_dir / RUN_INFO, info)
        write_summary(self._sweep_dir(config))

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if secondary_process():
            return
        path = self._sweep_dir(config)
        try:
            document = write_summary(path, final=True)
        except Exception:
            log.exception("could not write the sweep summary")
            return
        _last_sweep.clear()
        _last_sweep.update(document, path=str(path / SUMMARY))
