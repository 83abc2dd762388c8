"""A resumed sweep cannot wedge itself. Two resumes of one sweep at once: the second says it is busy, in one line,
and writes nothing; a job refused because another process trains in its dir leaves no refusal behind, so a later
resume and compare.py see the job as that process finished it. A disk that fills during a resumed sweep, or a job
dir that cannot be written, ends the command in one line, and a resume after that finishes the sweep."""

from __future__ import annotations

import csv
import fcntl
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_sweep_resume import error_lines, refused_resume, snapshot, summary

from attention_lab.records.commands import script_command
from conftest import ROOT, TRAIN, run_in_process, run_script, run_train_following_exec, script_env, wait_until

COMPARE = ROOT / "scripts" / "compare.py"
# What a resume adds: job 1 trains again for long enough to be caught while it trains.
LONGER = "max_steps=60"
DISK_MIB = 32  # see small_disk


def with_job_1_failed(finished: Path, where: Path) -> tuple[Path, str]:
    """A copy of ``finished`` (conftest's finished_sweep) whose job 1 failed; returns it and job 1's record as it
    was (ok)."""
    sweep_dir = where / "sweep"
    shutil.copytree(finished, sweep_dir, symlinks=True)
    info_path = sweep_dir / "1" / "run_info.json"
    ok_record = info_path.read_text()
    info_path.write_text(json.dumps({**json.loads(ok_record), "status": "failed", "error": "x"}))
    return sweep_dir, ok_record


def resume(sweep_dir: Path, *added: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(TRAIN), f"resume={sweep_dir}", *added], cwd=ROOT, env=script_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stopped_in_job_1(proc: subprocess.Popen, sweep_dir: Path) -> None:
    """Wait until ``proc`` holds job 1's dir (its lock names it), then stop it there (SIGSTOP)."""
    lock = sweep_dir / "1" / ".run.lock"
    wait_until(lambda: lock.is_file() and lock.read_text().startswith(f"pid {proc.pid} "), proc, "job 1 to start")
    proc.send_signal(signal.SIGSTOP)


def compare_statuses(sweep_dir: Path) -> list[str]:
    run_in_process(COMPARE, str(sweep_dir), check=True)
    with (sweep_dir / "compare.csv").open(newline="") as f:
        return [row["status"] for row in csv.DictReader(f)]


def test_a_second_resume_at_once_is_busy_and_leaves_nothing_behind(finished_sweep, tmp_path, monkeypatch):
    sweep_dir, _ = with_job_1_failed(finished_sweep, tmp_path)
    first = resume(sweep_dir, LONGER)
    try:
        stopped_in_job_1(first, sweep_dir)
        before = snapshot(sweep_dir)  # the first is stopped: nothing changes but what the second would write
        second = refused_resume(monkeypatch, sweep_dir)
        after = snapshot(sweep_dir)
    finally:
        first.send_signal(signal.SIGCONT)
        stdout, stderr = first.communicate(timeout=300)
    lines = second.stderr.strip().splitlines()
    assert second.returncode == 1 and len(lines) == 1, second.stderr[-3000:]
    assert lines[0].startswith(f"error: resume={sweep_dir} is busy: another resume of this sweep is running "
                               f"(pid {first.pid} "), lines[0]
    assert after == before, "the busy resume wrote into the sweep dir"
    assert first.returncode == 0 and not error_lines(subprocess.CompletedProcess([], 0, stdout, stderr)), stderr
    later = run_train_following_exec(f"resume={sweep_dir}")
    assert later.returncode == 0 and not error_lines(later), later.stderr[-3000:]
    assert "job 1 (" in later.stderr and "ok, kept as it is" in later.stderr
    assert compare_statuses(sweep_dir) == ["ok", "ok"]


def test_a_job_whose_dir_another_process_trains_in_leaves_no_refusal(finished_sweep, tmp_path):
    """The first resume's job 1 meets job 1's dir locked by another process (as a resume of that job alone
    would), and fails; that process then finishes job 1. The sweep is not left with a failed job 1."""
    sweep_dir, ok_record = with_job_1_failed(finished_sweep, tmp_path)
    with open(sweep_dir / "1" / ".run.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        lock.write("pid 1 on elsewhere")
        lock.flush()
        refused = run_script(TRAIN, f"resume={sweep_dir}", timeout=300)
        assert refused.returncode == 1 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
        assert error_lines(refused)[0].startswith("error: job 1 (") and "is training in" in error_lines(refused)[0]
        (sweep_dir / "1" / "run_info.json").write_text(ok_record)  # the other process finished job 1
    later = run_train_following_exec(f"resume={sweep_dir}")
    assert later.returncode == 0 and not error_lines(later), later.stderr[-3000:]
    assert {n: row["status"] for n, row in summary(sweep_dir).items()} == {0: "ok", 1: "ok"}
    assert compare_statuses(sweep_dir) == ["ok", "ok"]


@pytest.fixture
def small_disk(tmp_path):
    """A small tmpfs, which the test fills to the last block while job 1 trains. Emptied again, it must hold the
    whole sweep once job 1 has trained to its end: its checkpoints (best, last, and the temp file of each atomic
    save) and every event file of its TensorBoard run. A run writes more as the lab logs more, so the size leaves
    room to spare (filling it is a few thousand 4 KiB writes)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_MIB}m", "tmpfs", str(mount_point)],
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs needs root")
    yield mount_point
    subprocess.run(["umount", str(mount_point)], check=True)


def fill(disk: Path) -> Path:
    filler = disk / "filler"
    with open(filler, "wb", buffering=0) as handle:  # to the last block
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


def test_a_disk_that_fills_during_a_resumed_sweep_ends_in_one_line(finished_sweep, small_disk):
    sweep_dir, _ = with_job_1_failed(finished_sweep, small_disk)
    kept = snapshot(sweep_dir / "0")
    proc = resume(sweep_dir, LONGER)
    try:
        stopped_in_job_1(proc, sweep_dir)
        filler = fill(small_disk)
    finally:
        proc.send_signal(signal.SIGCONT)
        stdout, stderr = proc.communicate(timeout=300)
    assert proc.returncode == 1 and "Traceback" not in stdout + stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.strip() and "ok, kept as it is" not in line]
    assert len(lines) == 1 and lines[0].startswith("error: job 1 ("), stderr[-3000:]
    assert "No space left on device" in lines[0] and f"{script_command('train.py', cwd=ROOT)} resume={sweep_dir}" in lines[0]
    assert snapshot(sweep_dir / "0") == kept
    filler.unlink()  # room again: the sweep is finished by the command the line gave
    done = run_train_following_exec(f"resume={sweep_dir}")
    assert done.returncode == 0 and not error_lines(done), done.stderr[-3000:]
    assert {n: row["status"] for n, row in summary(sweep_dir).items()} == {0: "ok", 1: "ok"}


def test_a_read_only_job_dir_ends_a_resume_in_one_line_before_anything_changes(finished_sweep, tmp_path,
                                                                             monkeypatch):
    """A read-only mount binds root too (chmod does not)."""
    sweep_dir, _ = with_job_1_failed(finished_sweep, tmp_path)
    job_dir = sweep_dir / "1"
    if subprocess.run(["mount", "--bind", str(job_dir), str(job_dir)], capture_output=True).returncode != 0:
        pytest.skip("a bind mount needs root")
    try:
        subprocess.run(["mount", "-o", "remount,ro,bind", str(job_dir)], check=True)
        before = snapshot(sweep_dir)
        proc = refused_resume(monkeypatch, sweep_dir)
        after = snapshot(sweep_dir)
    finally:
        subprocess.run(["umount", str(job_dir)], check=True)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and "Traceback" not in proc.stdout, proc.stderr[-3000:]
    assert lines[0] == (f"error: resume={sweep_dir} is invalid: its 1/ cannot be written (read-only, or not writable "
                        "by you), and resuming the sweep writes its jobs' records there; make it writable, then resume "
                        "it again")
    assert after == before
