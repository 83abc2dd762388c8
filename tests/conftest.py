"""Shared test helpers: compose configs in-process, and run scripts/train.py as a user would.

How `make test` runs the tests (the Makefile's `test` target): every test not marked `slow`, in parallel on
pytest-xdist workers (`-n 3 --dist loadscope --no-loadscope-reorder`: a module's tests run on one worker, so a
module-scoped fixture is built once, and modules are handed out in the order collected). Such a test must not share
anything with another test: its files under ``tmp_path``, no fixed port, and it waits for the event it needs
(``wait_until``: a file written, a step reached), never a fixed sleep. Each worker's torch runs one thread.
Modules marked ``early`` (the SLURM tests, minutes of waiting on the cluster's time limits) are collected first,
so that everything else runs beside them instead of after them. `make test-all` adds the `slow` tests; those marked
``serial`` (the extension test's run of the whole suite) run after the others, one at a time.
Session fixtures that train (``tiny_trained_run``, ``solved_run``) are built once for all workers (``built_once``).
Tests marked ``gpu`` need CUDA and skip without it; `make test-gpu` runs only those.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import io
import logging
import os
import runpy
import shutil
import signal
import subprocess
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from filelock import FileLock
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from attention_lab.config import register_configs

ROOT = Path(__file__).resolve().parents[1]
CONFIG_DIR = ROOT / "configs"
TRAIN = ROOT / "scripts" / "train.py"
# Quiet, fast runs: no progress bar redraws in captured output.
QUIET = ["trainer.enable_progress_bar=false", "~callbacks.progress_bar"]


def wait_until(condition, proc: subprocess.Popen, what: str, timeout: float = 240) -> None:
    """Poll ``condition`` while ``proc`` (a run or a sweep started with Popen) lives; fail if it ends first."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert proc.poll() is None, f"the process ended before {what}:\n{proc.communicate()[1][-3000:]}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.02)


def signal_when(proc: subprocess.Popen, condition, what: str, *signums: int, timeout: float = 120) -> tuple[str, str]:
    """Once ``condition`` holds, send ``signums`` to ``proc`` (a run or sweep started with Popen), a moment apart;
    returns its (stdout, stderr). The process never outlives the test."""
    try:
        wait_until(condition, proc, what)
        for n, signum in enumerate(signums):
            if n:
                time.sleep(0.02)
            proc.send_signal(signum)
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()


def unwritable_out(tmp_path: Path, case: str, name: str) -> Path:
    """An --out that nothing can be written to: an existing file, a path under a file, or a read-only dir
    (skipped as root, which writes into read-only dirs)."""
    blocker = tmp_path / "blocker"
    blocker.write_text("not a directory\n")
    if case == "read_only_dir":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only directories")
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        return locked / name
    return blocker if case == "existing_file" else blocker / name


def docs_table(page: Path, first_column: str) -> list[str]:
    """The rows of the table on a docs page whose header's first cell is ``first_column`` (below the header and its
    rule, up to a blank line or a marker line), read as the page shows them, not as the generator writes them."""
    text = page.read_text(encoding="utf-8")
    table = text[text.index(f"\n| {first_column} |") + 1:].split("\n\n")[0].split("\n<!--")[0]
    return table.splitlines()[2:]


def compose_config(overrides: list[str] | None = None, *, return_hydra_config: bool = False):
    """The composed training config, as scripts/train.py would see it: a copy of its own for each caller."""
    return copy.deepcopy(composed(tuple(overrides or []), return_hydra_config, os.getcwd()))


@functools.cache
def composed(overrides: tuple[str, ...], return_hydra_config: bool, cwd: str):
    """Composed once per worker for each command line (and working dir, which Hydra's settings record): the
    project's configs do not change during a session, and a composition costs a tenth of a second."""
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose("train", overrides=list(overrides), return_hydra_config=return_hydra_config)


def validated_untrained(overrides: list[str], tmp_path: Path, seed: int | None = None):
    """The composed config, an untrained module of it and its datamodule (built after ``torch.manual_seed(seed)``
    when a seed is given), and the results of one ``trainer.validate``: one dict per validation set."""
    import lightning as L
    import torch
    from hydra.utils import instantiate

    cfg = compose_config(overrides)
    if seed is not None:
        torch.manual_seed(seed)
    datamodule = instantiate(cfg.data)
    module = instantiate(cfg.module, vocab=datamodule.vocab.itos)
    trainer = L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tmp_path, accelerator="cpu")
    return cfg, module, datamodule, trainer.validate(module, datamodule=datamodule, verbose=False)


def check_command_line(argv: list[str], config_dir: Path = CONFIG_DIR) -> None:
    """Raises what scripts/train.py's checks (attention_lab.run.preflight.PreflightChecks) would refuse in this
    command line, composed in-process with the Compose API as Hydra composes it for the run."""
    from hydra.types import RunMode

    from attention_lab.checks import validate
    from attention_lab.run.cli import check_knob_types
    from attention_lab.run.overrides import hydra_compose_api, is_override
    from attention_lab.run.preflight import check_single_run, check_sweep_job, checked_resume
    from attention_lab.run.sweep_jobs import sweep_job_configs

    overrides = [arg for arg in argv if is_override(arg)]
    check_knob_types(argv)
    with hydra_compose_api(config_dir):
        if "-m" in argv or "--multirun" in argv:
            sweep_job_configs(overrides, "train", check_sweep_job, validate)
            return
        cfg = compose("train", overrides=overrides, return_hydra_config=True)
        if cfg.hydra.mode == RunMode.MULTIRUN:  # a preset such as hparams_search=optuna makes it a sweep
            sweep_job_configs(overrides, "train", check_sweep_job, validate)
            return
        check_single_run(cfg)
        if cfg.get("resume"):  # the resumed run's config: composed and checked by the task function
            checked_resume(str(cfg.resume), overrides, "train", config_dir)


def script_env() -> dict[str, str]:
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONWARNINGS="ignore", HYDRA_FULL_ERROR="0")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def start_train(*args: str) -> subprocess.Popen:
    """scripts/train.py ``args`` in a process of its own (quiet console, output captured as text): for what only a
    process shows, a signal it gets or a second process beside it."""
    return subprocess.Popen([sys.executable, str(TRAIN), *args, *QUIET], cwd=ROOT, env=script_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def run_script(script: Path | str, *args: str, cwd: Path | None = None, timeout: float = 300,
               check: bool = False, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run a script of scripts/ in a subprocess (in ``env``, default :func:`script_env`); output captured as text."""
    proc = subprocess.run([sys.executable, str(script), *args], cwd=cwd or ROOT, env=env or script_env(),
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{script} {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def logger_states() -> dict[logging.Logger, tuple[list[logging.Handler], int, bool, bool]]:
    """Every logger's handlers, level, propagation and whether it is disabled, the root logger's included."""
    loggers = [logging.getLogger(), *(logger for logger in list(logging.Logger.manager.loggerDict.values())
                                      if isinstance(logger, logging.Logger))]
    return {logger: (logger.handlers[:], logger.level, logger.propagate, logger.disabled) for logger in loggers}


@contextlib.contextmanager
def loggers_kept(*, root: bool) -> Iterator[None]:
    """Every logger as it was before the block: the handlers the block added go (closed: they write to a console
    the block captured, closed after it), level, propagation and ``disabled`` come back; with ``root``, the root
    logger gets its handlers back too (pytest's own capture, which Hydra's logging configuration takes away;
    without it, pytest's per-phase handlers on the root logger are left to pytest). Elsewhere what the block
    removed stays removed, as in a process: train() takes Lightning's console handler, made at import on whatever
    stream was sys.stderr then (perhaps closed since)."""
    loggers = logger_states()
    try:
        yield
    finally:
        root_logger = logging.getLogger()
        for logger in logger_states():  # a logger first configured by the block: as a new one is
            if logger is root_logger and not root:
                continue
            handlers, level, propagate, disabled = loggers.get(logger, ([], logging.NOTSET, True, False))
            for handler in [h for h in logger.handlers if h not in handlers]:
                logger.removeHandler(handler)
                handler.close()
            if logger is root_logger:
                root_logger.handlers[:] = handlers
            if logger.level != level:  # setLevel clears every logger's level cache: only where it changed
                logger.setLevel(level)
            logger.propagate, logger.disabled = propagate, disabled


@contextlib.contextmanager
def process_state_kept() -> Iterator[None]:
    """What a script's run changes in its process and a later test must not inherit: the environment (Lightning's
    PL_GLOBAL_SEED, the lab's HYDRA_FULL_ERROR hand-over), sys.argv, the cwd, the loggers (:func:`loggers_kept`:
    Hydra's job logging configures the root logger, the review scripts the ``attention_lab`` logger, each with a
    stream of this call's console), warning filters, torch's thread count and the garbage collector (paused while
    a run starts)."""
    import torch

    environ, argv, cwd, threads = dict(os.environ), sys.argv, os.getcwd(), torch.get_num_threads()
    GlobalHydra.instance().clear()
    try:
        with loggers_kept(root=True), warnings.catch_warnings():
            yield
    finally:
        os.environ.clear()
        os.environ.update(environ)
        sys.argv = argv
        os.chdir(cwd)
        torch.set_num_threads(threads)
        gc.enable()
        GlobalHydra.instance().clear()


def run_in_process(script: Path | str, *args: str, check: bool = False) -> subprocess.CompletedProcess:
    """A script of scripts/ as ``python script args`` would run it, in this process (its ``__main__``, the same
    entry function as on the command line): exit status and console text, shaped like ``subprocess.run``'s
    result. For what only a process shows (signals, a console's every warning, an exec), use :func:`run_script`."""
    stdout, stderr = io.StringIO(), io.StringIO()
    code: int = 0
    with process_state_kept():
        os.environ.update(script_env())
        sys.argv = [str(script), *args]
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            try:
                runpy.run_path(str(script), run_name="__main__")
            except SystemExit as stop:  # as the interpreter ends a process: a text is printed and means status 1
                if isinstance(stop.code, str):
                    stderr.write(stop.code + "\n")
                code = stop.code if isinstance(stop.code, int) else int(stop.code is not None)
    proc = subprocess.CompletedProcess([str(script), *args], code, stdout.getvalue(), stderr.getvalue())
    if check and code != 0:
        raise AssertionError(f"{script} {' '.join(args)} exited {code}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def train_args(run_dir: Path, overrides: tuple[str, ...], multirun: bool) -> list[str]:
    where = f"hydra.sweep.dir={run_dir}" if multirun else f"hydra.run.dir={run_dir}"
    return (["-m"] if multirun else []) + [*overrides, *QUIET, where]


def run_train(run_dir: Path, *overrides: str, multirun: bool = False, check: bool = True) -> subprocess.CompletedProcess:
    """scripts/train.py in this process, with its outputs in run_dir (hydra.run.dir, or hydra.sweep.dir with -m)."""
    return run_in_process(TRAIN, *train_args(run_dir, overrides, multirun), check=check)


def run_train_process(run_dir: Path, *overrides: str, multirun: bool = False, timeout: float = 300,
                      check: bool = True) -> subprocess.CompletedProcess:
    """scripts/train.py as a process of its own, as :func:`run_train`: where only a process shows it."""
    return run_script(TRAIN, *train_args(run_dir, overrides, multirun), timeout=timeout, check=check)


def pytest_configure(config: pytest.Config) -> None:
    """Before a test module imports torch: OpenMP threads wait passively, in the workers and in every process they
    start. The tests share the cores, and a thread that spins while it waits for a descheduled sibling burns the
    CPU the other tests need (docs/benchmarks.md, "What the measurements found": thread spinning). A value
    already set is kept."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests marked ``early`` first, the others in the order collected."""
    items.sort(key=lambda item: item.get_closest_marker("early") is None)


@pytest.fixture(autouse=True)
def _clear_hydra_and_keep_loggers():
    """Each test starts with no Hydra instance and leaves the loggers as it found them: a test that calls a review
    script's main() under capsys points the ``attention_lab`` logger at capsys's stream, closed after the test (a
    later test's run then logged "I/O operation on closed file")."""
    with loggers_kept(root=False):
        yield
    GlobalHydra.instance().clear()


@pytest.fixture(scope="session", autouse=True)
def _one_torch_thread_per_worker():
    """Under pytest-xdist the workers share the cores: each computes in one thread instead of all of them
    contending for every core."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)
    yield


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny forward passes: one thread is fastest, and much faster on a busy machine."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def small_filesystem(tmp_path):
    """A 512 KiB tmpfs: the run dir's filesystem is full while the system temp dir has room."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mount_point)],
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    yield mount_point
    subprocess.run(["umount", str(mount_point)], check=True)


def built_once(tmp_path_factory, name: str, build) -> Path:
    """``build(dir)`` once for the whole `make test` run: pytest-xdist's workers share it (the first builds it
    under a file lock, the others wait and reuse it); ``dir / "done"`` marks it complete."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    # Each worker's basetemp is <run's temp>/popen-gwN; their parent belongs to this run alone.
    root = tmp_path_factory.getbasetemp().parent if worker else tmp_path_factory.getbasetemp()
    folder = root / name
    with FileLock(str(root / f"{name}.lock")):
        if not (folder / "done").is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a build that failed before
            folder.mkdir()
            build(folder)
            (folder / "done").touch()
    return folder


@pytest.fixture(scope="session")
def tiny_trained_run(tmp_path_factory) -> Path:
    """One small trained run dir (default multihead model: 2 layers x 4 heads, task reverse; a few
    seconds), shared by every test that needs a checkpoint. Treat it as read-only."""
    def build(folder: Path) -> None:
        run_train(folder / "run", "max_steps=60", "task.train_size=256", "task.val_size=64",
                  "callbacks.attention_maps.images=false")
    return built_once(tmp_path_factory, "tiny_trained_run", build) / "run"


# The default experiment (`python scripts/train.py`) must reach >= 0.99 validation sequence accuracy well
# before this bound (measured: first at step 150 on CPU, seed 0; perfect 1.0 at a few hundred steps).
SOLVED_RUN_MAX_STEPS = 600
# Training subprocesses of the tests use one intra-op thread: the models are tiny, and on a busy machine
# (tests running side by side) torch's default of one thread per core slows every step many times over.
SINGLE_THREAD_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@pytest.fixture
def single_thread(monkeypatch):
    """Subprocesses started by this test (run_train, run_script) use one intra-op thread."""
    for key, value in SINGLE_THREAD_ENV.items():
        monkeypatch.setenv(key, value)


@pytest.fixture(scope="session")
def solved_run(tmp_path_factory) -> Path:
    """The default experiment (multihead, 2 layers x 4 heads, task reverse, attention maps on) trained
    until validation reaches SOLVED (callbacks/steps_to_solve.py: the run stops there, so its final metrics.json
    is the solved model, measured once more), shared by the end-to-end, event-file and TensorBoard-server tests.
    Treat it as read-only."""
    def build(folder: Path) -> None:
        run_train(folder / "run", f"max_steps={SOLVED_RUN_MAX_STEPS}", "log_attention_every_n_steps=50")
    return built_once(tmp_path_factory, "solved_run", build) / "run"


@pytest.fixture(scope="session")
def trained_induction(tmp_path_factory):
    """A short 2-layer induction run (250 steps, seed 0, one thread), trained once for all workers and shared by the
    ablation and patching tests: its module in eval mode and its validation batches. Treat them as read-only."""
    import lightning as L
    import torch
    from hydra.utils import instantiate

    overrides = ["task=induction", "mask=causal", "layers=2", "task.train_size=2000", "task.val_size=200", "seed=0"]

    def build(folder: Path) -> None:
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            cfg = compose_config(overrides)
            torch.manual_seed(0)
            datamodule = instantiate(cfg.data)
            module = instantiate(cfg.module, vocab=datamodule.vocab.itos)
            trainer = L.Trainer(max_steps=250, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                                enable_model_summary=False, limit_val_batches=0, accelerator="cpu", deterministic=True)
            trainer.fit(module, datamodule=datamodule)
            datamodule.setup("validate")
            torch.save({"vocab": datamodule.vocab.itos, "state_dict": module.state_dict(),
                        "batches": list(datamodule.val_dataloader())}, folder / "induction.pt")
        finally:
            torch.set_num_threads(threads)

    saved = torch.load(built_once(tmp_path_factory, "trained_induction", build) / "induction.pt", weights_only=True)
    module = instantiate(compose_config(overrides).module, vocab=saved["vocab"])
    module.load_state_dict(saved["state_dict"])
    return module.eval(), saved["batches"]


# What a run whose test reads only its training metrics (loss, accuracy, head scores, ablation) leaves out: the
# callbacks that draw, or record for the attention tab and the circuit views. They observe: a run trains to the
# same numbers without them.
OBSERVERS_OFF = ["~callbacks.head_score_maps", "~callbacks.attention_maps", "~callbacks.loss_by_index_map",
                 "~callbacks.circuit_scores", "~callbacks.module_values", "patching=false", "path_patching=false"]
# A sweep's jobs at their smallest: 2 steps, no images drawn at the final validation.
TINY_JOB = ["max_steps=2", "task.train_size=64", "task.val_size=32", "callbacks.attention_maps.images=false",
            "~callbacks.head_score_maps", "ablation=[]"]


@pytest.fixture(scope="session")
def finished_sweep(tmp_path_factory) -> Path:
    """A finished two-job basic sweep (`-m heads=1,2`, TINY_JOB), shared by the tests that read it or resume a copy
    of it; what the sweep printed is in console.txt beside it. Treat it as read-only."""
    def build(folder: Path) -> None:
        proc = run_train(folder / "sweep", "heads=1,2", *TINY_JOB, multirun=True)
        (folder / "console.txt").write_text(proc.stdout)
    return built_once(tmp_path_factory, "finished_sweep", build) / "sweep"


@pytest.fixture(scope="session")
def interrupted_run(tmp_path_factory) -> Path:
    """A run stopped by SIGTERM after its first checkpoint (a process: the signal is real; no early stopping, no
    images), shared by the tests of what an interrupted run leaves and of resuming it; what it printed (stdout, then
    stderr) is in console.txt beside it. Treat it as read-only: tests copy it before changing anything."""
    def build(folder: Path) -> None:
        run_dir = folder / "run"
        proc = start_train("max_steps=100000", "task.train_size=256", "task.val_size=64", "trainer.val_check_interval=10",
                           "callbacks.attention_maps.images=false", "~callbacks.early_stopping",
                           "~callbacks.head_score_maps", "ablation=[]", f"hydra.run.dir={run_dir}")
        stdout, stderr = signal_when(proc, lambda: (run_dir / "checkpoints" / "last.ckpt").exists(), "a checkpoint",
                                     signal.SIGTERM)
        assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
        (folder / "console.txt").write_text(stdout + stderr)
    return built_once(tmp_path_factory, "interrupted_run", build) / "run"


def run_train_following_exec(*args: str) -> subprocess.CompletedProcess:
    """scripts/train.py in this process, as :func:`run_in_process`, for a command that may relaunch itself with
    ``os.execv`` (``resume=<sweep dir>`` becomes the sweep's own command line): the command it would become runs in
    this process too, and its console and exit status are the result, as they are the process's after an exec."""
    def execv(_path, argv):
        proc = run_in_process(argv[1], *argv[2:])
        sys.stdout.write(proc.stdout)
        sys.stderr.write(proc.stderr)
        sys.exit(proc.returncode)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(os, "execv", execv)
        return run_in_process(TRAIN, *args)
