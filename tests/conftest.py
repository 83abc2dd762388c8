"""Shared test helpers: compose configs in-process, and run scripts/train.py as a user would."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
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


def compose_config(overrides: list[str] | None = None, *, return_hydra_config: bool = False):
    """The composed training config, as scripts/train.py would see it."""
    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        return compose("train", overrides=overrides or [], return_hydra_config=return_hydra_config)


def script_env() -> dict[str, str]:
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONWARNINGS="ignore", HYDRA_FULL_ERROR="0")
    env.pop("CUDA_VISIBLE_DEVICES", None)
    return env


def run_script(script: Path | str, *args: str, cwd: Path | None = None, timeout: float = 300,
               check: bool = False) -> subprocess.CompletedProcess:
    """Run a script of scripts/ in a subprocess; output captured as text."""
    proc = subprocess.run([sys.executable, str(script), *args], cwd=cwd or ROOT, env=script_env(),
                          capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{script} {' '.join(args)} exited {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


def run_train(run_dir: Path, *overrides: str, multirun: bool = False, timeout: float = 300,
              check: bool = True) -> subprocess.CompletedProcess:
    """scripts/train.py with its outputs in run_dir (hydra.run.dir, or hydra.sweep.dir with -m)."""
    where = f"hydra.sweep.dir={run_dir}" if multirun else f"hydra.run.dir={run_dir}"
    args = (["-m"] if multirun else []) + [*overrides, *QUIET, where]
    return run_script(TRAIN, *args, timeout=timeout, check=check)


@pytest.fixture(autouse=True)
def _clear_hydra():
    yield
    GlobalHydra.instance().clear()


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


@pytest.fixture(scope="session")
def tiny_trained_run(tmp_path_factory) -> Path:
    """One small trained run dir (default multihead model: 2 layers x 4 heads, task reverse; a few
    seconds), shared by every test that needs a checkpoint. Treat it as read-only."""
    run_dir = tmp_path_factory.mktemp("tiny_trained_run") / "run"
    run_train(run_dir, "max_steps=60", "task.train_size=256", "task.val_size=64", "~callbacks.attention_maps")
    return run_dir


# The default experiment (`python scripts/train.py`) must reach >= 0.99 validation sequence accuracy well
# before this bound (measured: first at step 150 on CPU, seed 0; perfect 1.0 at a few hundred steps).
SOLVED_RUN_MAX_STEPS = 600
# Stop as soon as val/seq_acc >= 0.99 (EarlyStopping's threshold is a strict ">"; accuracies are multiples
# of 1/val_size), so the final metrics.json of the run is the solved model, measured once more.
SOLVED_AT = 0.99
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
    until validation reaches SOLVED_AT, shared by the end-to-end, event-file and TensorBoard-server tests.
    Treat it as read-only."""
    run_dir = tmp_path_factory.mktemp("solved_run") / "run"
    with pytest.MonkeyPatch.context() as mp:
        for key, value in SINGLE_THREAD_ENV.items():
            mp.setenv(key, value)
        run_train(run_dir, f"max_steps={SOLVED_RUN_MAX_STEPS}", "log_attention_every_n_steps=50",
                  f"callbacks.early_stopping.stopping_threshold={SOLVED_AT - 1e-4}", timeout=600)
    return run_dir
