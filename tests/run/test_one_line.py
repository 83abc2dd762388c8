"""One line, always: an error that ends one of a run's other threads (TensorBoard's event writers, on a full disk)
and a logger or callback argument that the lab cannot check each end the command in one ``error:`` line, with no
traceback printed; a thread's traceback goes to the run dir's traceback.txt, and a refused argument is refused
before the run dir (or the sweep dir) exists, and before a resumed record's dir changes.

Every case runs scripts/train.py's entry function in-process; Python's own ``threading.excepthook`` is put in place
first, as a process has it (pytest installs its own for each test, which would hide what a process prints)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import threading
from pathlib import Path

import pytest
from lightning.pytorch.callbacks import Callback
from test_errors import assert_one_line_error
from test_records_are_data import TINY, interrupted_run_dir
from test_sweep_resume import fake_sweep, snapshot

from conftest import run_train, run_train_following_exec

HANDED_ON = "+logger.tensorboard.filename_suffix=/../../../outside"  # torch's SummaryWriter: an event file anywhere


@pytest.fixture
def python_thread_hook(monkeypatch):
    """Python's own threading.excepthook (it prints a thread's traceback to stderr), as in a process."""
    monkeypatch.setattr(threading, "excepthook", threading.__excepthook__)
    return threading.__excepthook__


def full_mount(folder: Path) -> Path:
    """``folder`` as a 4 KiB tmpfs filled to its last byte (skipped where mounting needs root): the first event
    written there fails in its writer's thread, while the rest of the run dir has room."""
    folder.mkdir(parents=True)
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(folder)],
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    free = os.statvfs(folder)
    (folder / "filler").write_bytes(b"\0" * (free.f_bavail * free.f_frsize))
    assert os.statvfs(folder).f_bavail == 0
    return folder


@pytest.fixture
def full_job_tensorboard(tmp_path):
    """A sweep dir whose first job's TensorBoard folder has no room."""
    sweep_dir = tmp_path / "sweep"
    mount = full_mount(sweep_dir / "0" / "tensorboard")
    yield sweep_dir
    subprocess.run(["umount", str(mount)], check=True)


class FailsInAThread(Callback):
    """At the end of training, runs a thread of its own that fails: what an event writer whose last write failed
    leaves behind, after the training thread has ended well."""

    def on_train_end(self, trainer, pl_module) -> None:
        thread = threading.Thread(target=self.fail, name="lab-test-writer")
        thread.start()
        thread.join()

    @staticmethod
    def fail() -> None:
        raise RuntimeError("the test's writer failed")


# --- threads -----------------------------------------------------------------------------------------------------

def test_an_event_writer_that_fails_in_its_thread_stops_the_sweep_in_one_line(full_job_tensorboard,
                                                                              python_thread_hook):
    """The disk fills as a sweep's job writes its first event: TensorBoard's writer thread ends with ENOSPC (it
    printed its traceback before the lab's line), and the training thread gets the same error at its next write."""
    proc = run_train(full_job_tensorboard, "heads=1,2", *TINY, "hydra/launcher=basic", multirun=True, check=False)
    assert_one_line_error(proc, "job 0", "stopped the sweep", os.strerror(errno.ENOSPC), "free some space")
    text = (full_job_tensorboard / "0" / "traceback.txt").read_text()
    assert text.startswith("Exception in thread ") and f"OSError: [Errno {errno.ENOSPC}]" in text, text
    assert threading.excepthook is python_thread_hook, "the run left its hook in place"


def test_a_thread_that_fails_after_training_ended_well_fails_the_run_in_one_line(tmp_path, python_thread_hook):
    run_dir = tmp_path / "run"
    proc = run_train(run_dir, *TINY, f"+callbacks.fails._target_={__name__}.FailsInAThread", check=False)
    line = assert_one_line_error(proc, "RuntimeError: the test's writer failed", f"traceback in {run_dir}")
    assert proc.returncode == 1, line
    text = (run_dir / "traceback.txt").read_text()
    assert text.startswith("Exception in thread lab-test-writer:\n") and "in fail\n" in text, text
    info = json.loads((run_dir / "run_info.json").read_text())
    assert info["status"] == "failed" and "the test's writer failed" in info["error"]
    assert threading.excepthook is python_thread_hook


def test_thread_errors_are_kept_not_printed(capfd, python_thread_hook):
    from attention_lab.run.thread_errors import ThreadErrors

    def fail() -> None:
        raise ValueError("kept")

    with ThreadErrors() as errors:
        assert threading.excepthook is not python_thread_hook
        threads = [threading.Thread(target=fail, name=f"t{n}") for n in range(2)]
        for thread in threads:
            thread.start()
        errors.settle()
        assert not any(thread.is_alive() for thread in threads)
    assert threading.excepthook is python_thread_hook
    assert capfd.readouterr().err == ""
    assert sorted(e.thread for e in errors.errors) == ["t0", "t1"]
    assert all(isinstance(e.error, ValueError) for e in errors.errors)
    text = errors.traceback_of(None)
    assert text.count("ValueError: kept") == 2 and "Exception in thread t0:" in text, text


# --- arguments ---------------------------------------------------------------------------------------------------

ARGUMENTS = {  # what the lab cannot check, and what its line names
    "handed_on": ([HANDED_ON], ["logger.tensorboard.filename_suffix=/../../../outside", "not an argument of",
                                "hand it on, unchecked", "save_dir, name, version"]),
    "handed_on_log_dir": (["+logger.tensorboard.log_dir={tmp}/elsewhere"], ["logger.tensorboard.log_dir="]),
    "unknown": (["+callbacks.lr_monitor.logging_intervall=epoch"],
                ["callbacks.lr_monitor.logging_intervall=epoch", "not an argument of",
                 "did you mean callbacks.lr_monitor.logging_interval?"]),
    "positional": (["+logger.extra={{_target_:lightning.pytorch.loggers.CSVLogger,_args_:[a,b,c,d,e,f]}}"],
                   ["logger.extra._args_ is invalid", "at most 5 positional arguments"]),
    "no_such_class": (["+callbacks.z._target_=attention_lab.no_such_module.Nope"],
                      ["callbacks.z._target_=attention_lab.no_such_module.Nope is invalid"]),
}


@pytest.mark.parametrize("name", sorted(ARGUMENTS))
def test_an_argument_the_lab_cannot_check_is_one_line_before_the_run_dir_exists(tmp_path, python_thread_hook, name):
    overrides, fragments = ARGUMENTS[name]
    run_dir = tmp_path / "run"
    proc = run_train(run_dir, *TINY, *(o.format(tmp=tmp_path) for o in overrides), check=False)
    assert_one_line_error(proc, *fragments)
    assert proc.returncode == 1
    assert sorted(tmp_path.iterdir()) == [], "the run dir, or a file outside it, was written"


def test_a_sweep_with_such_an_argument_is_refused_before_it_starts(tmp_path):
    sweep_dir = tmp_path / "sweep"
    proc = run_train(sweep_dir, "heads=1,2", *TINY, HANDED_ON, multirun=True, check=False)
    assert_one_line_error(proc, "logger.tensorboard.filename_suffix", "no job of the sweep has started")
    assert proc.returncode == 1
    assert not sweep_dir.exists()


@pytest.mark.parametrize("sweep", [False, True], ids=["run_record", "sweep_record"])
def test_a_record_with_such_an_argument_is_refused_and_left_as_it_was(tmp_path, sweep):
    """A record is data: what it replays passes the same check (its write locations aside, which a record may not
    change at all)."""
    overrides = [*TINY, HANDED_ON]
    where = fake_sweep(tmp_path, ["heads=1,2", *overrides], []) if sweep else interrupted_run_dir(tmp_path, overrides)
    before = snapshot(tmp_path)
    proc = run_train_following_exec(f"resume={where}")
    assert_one_line_error(proc, "logger.tensorboard.filename_suffix", "not an argument of")
    assert proc.returncode == 1
    after = snapshot(tmp_path)
    if not sweep:  # Hydra opens the run's log file before any task function runs: empty, as for every refused resume
        assert after.pop("run/train.log")[0] == b""
    assert after == before
