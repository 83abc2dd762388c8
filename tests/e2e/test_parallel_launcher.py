"""hydra/launcher=parallel: each job in a process of its own. A job whose process is killed (as by
the out-of-memory killer) fails alone and the others finish; SIGTERM to the sweep stops every job with a
checkpoint, and resume=<sweep dir> finishes them; so does SIGKILL of the sweep's main process, whose jobs and
fork server do not outlive it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
import torch

from conftest import TRAIN, run_script, run_train, start_train, wait_until

# Tiny runs; a checkpoint every 10 steps. Job 1 trains until it is stopped.
SMALL = ["task.train_size=256", "task.val_size=32", "trainer.val_check_interval=10",
         "callbacks.attention_maps.images=false", "~callbacks.early_stopping", "~callbacks.head_score_maps",
         "ablation=[]", "hydra/launcher=parallel", "hydra.launcher.n_jobs=2"]


def start_sweep(sweep_dir: Path, *overrides: str) -> subprocess.Popen:
    return start_train("-m", *overrides, *SMALL, f"hydra.sweep.dir={sweep_dir}")


def info(job_dir: Path) -> dict:
    try:
        return json.loads((job_dir / "run_info.json").read_text())
    except (OSError, ValueError):
        return {}


def finish(proc: subprocess.Popen, timeout: float = 240) -> str:
    try:
        return proc.communicate(timeout=timeout)[1]
    finally:
        if proc.poll() is None:
            proc.kill()


def kill_when_running(job_dir: Path, killed: list[int], timeout: float = 240) -> None:
    """SIGKILL the job of ``job_dir`` once its record says it runs, as the out-of-memory killer would; its pid goes
    to ``killed``."""
    deadline = time.monotonic() + timeout
    while info(job_dir).get("status") != "running" and time.monotonic() < deadline:
        time.sleep(0.02)
    if "pid" in info(job_dir):
        killed.append(info(job_dir)["pid"])
        with contextlib.suppress(ProcessLookupError):  # ended by itself: the test's assertions say so
            os.kill(killed[0], signal.SIGKILL)


@pytest.mark.timeout(300)  # were job 1 never killed, it would train on
def test_a_killed_job_fails_alone(tmp_path):
    """The sweep runs in this process (the kill is its job's, not its own); the killer waits in a thread. Its two
    jobs run side by side, each in a process of its own."""
    sweep_dir = tmp_path / "sweep"
    killed: list[int] = []
    killer = threading.Thread(target=kill_when_running, args=(sweep_dir / "1", killed), daemon=True)
    killer.start()
    proc = run_train(sweep_dir, "max_steps=60,100000", *SMALL, multirun=True, check=False)
    killer.join()
    stderr = proc.stderr
    assert killed and killed[0] not in (os.getpid(), info(sweep_dir / "0")["pid"]), "a process of its own each"
    assert "2 at a time, each in its own process" in proc.stdout + stderr
    # Side by side: job 1 started (its .hydra/config.yaml) before job 0 finished (its metrics.json).
    started, finished = sweep_dir / "1" / ".hydra" / "config.yaml", sweep_dir / "0" / "metrics.json"
    assert started.stat().st_mtime < finished.stat().st_mtime
    assert proc.returncode == 1 and "Traceback" not in stderr, stderr[-3000:]
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 2 and "job 1" in errors[0] and "killed by SIGKILL" in errors[0], stderr[-3000:]
    assert "1 failed, 1 ok" in errors[1]

    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    jobs = {row["job"]: row for row in summary["jobs"]}
    assert summary["counts"] == {"ok": 1, "failed": 1} and sorted(jobs) == [0, 1]
    assert jobs[0]["status"] == "ok" and jobs[0]["metrics"]["global_step"] == 60
    assert jobs[1]["status"] == "failed" and "killed by SIGKILL" in jobs[1]["error"]
    assert info(sweep_dir / "1")["status"] == "failed" and "SIGKILL" in info(sweep_dir / "1")["error"]


def test_sigterm_stops_every_job_with_a_checkpoint_then_resume_finishes_them(tmp_path):
    sweep_dir = tmp_path / "sweep"
    proc = start_sweep(sweep_dir, "max_steps=100000", "seed=0,1")
    checkpoints = [sweep_dir / str(n) / "checkpoints" / "last.ckpt" for n in (0, 1)]
    wait_until(lambda: all(path.exists() for path in checkpoints), proc, "both jobs' first checkpoints")
    pids = [info(sweep_dir / str(n))["pid"] for n in (0, 1)]
    proc.send_signal(signal.SIGTERM)
    stderr = finish(proc)
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert "Traceback" not in stderr
    for pid in pids:  # no orphan goes on training
        assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text()
    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert summary["counts"] == {"interrupted": 2}, summary
    steps = []
    for n, path in enumerate(checkpoints):
        assert info(sweep_dir / str(n))["status"] == "interrupted" and "SIGTERM" in info(sweep_dir / str(n))["error"]
        steps.append(torch.load(path, map_location="cpu", weights_only=True)["global_step"])
        assert 10 <= steps[-1] < 100000

    resumed = run_script(TRAIN, f"resume={sweep_dir}", f"max_steps={max(steps) + 20}", timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert summary["counts"] == {"ok": 2}
    for n, step in enumerate(steps):  # each job continued from its own checkpoint, in its own dir
        assert info(sweep_dir / str(n))["attempts"] == 2
        assert f"resuming {sweep_dir / str(n)} from {checkpoints[n]}" in (sweep_dir / str(n) / "train.log").read_text()
        assert step < json.loads((sweep_dir / str(n) / "metrics.json").read_text())["global_step"] <= max(steps) + 20


def descendants(pid: int) -> set[int]:
    """The processes under ``pid`` (its children, theirs, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
        children.setdefault(ppid, []).append(int(stat.parent.name))
    found, todo = set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        return "(zombie)" not in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def test_sigkill_of_the_sweep_stops_its_jobs_with_a_checkpoint_then_resume_finishes_them(tmp_path):
    sweep_dir = tmp_path / "sweep"
    proc = start_sweep(sweep_dir, "max_steps=100000", "seed=0,1,2")  # 2 at a time: job 2 never starts
    checkpoints = [sweep_dir / str(n) / "checkpoints" / "last.ckpt" for n in (0, 1)]
    family: set[int] = set()
    try:
        wait_until(lambda: all(path.exists() for path in checkpoints), proc, "both jobs' first checkpoints")
        family = descendants(proc.pid)  # the fork server, the two jobs (and multiprocessing's resource tracker)
        jobs = {info(sweep_dir / str(n))["pid"] for n in (0, 1)}
        assert jobs <= family and len(family) >= 3, (jobs, family)
        proc.kill()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 120  # the jobs finish their step and save a checkpoint first
        while any(alive(pid) for pid in family):
            assert time.monotonic() < deadline, f"still running after the sweep was killed: {family}"
            time.sleep(0.05)
        stderr = proc.communicate(timeout=30)[1]  # every writer of the pipe has exited: no wait
    finally:
        for pid in family:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
    assert stderr.count(f"the sweep's main process (pid {proc.pid}) is gone") == 2, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    steps = []
    for n, path in enumerate(checkpoints):
        record = info(sweep_dir / str(n))
        assert record["status"] == "interrupted" and "SIGTERM" in record["error"], record
        steps.append(torch.load(path, map_location="cpu", weights_only=True)["global_step"])
        assert 10 <= steps[-1] < 100000
    assert not (sweep_dir / "2").exists()  # never started: nothing to record yet, the resume trains it
    assert json.loads((sweep_dir / "sweep_summary.json").read_text())["counts"] == {"interrupted": 2}

    resumed = run_script(TRAIN, f"resume={sweep_dir}", f"max_steps={max(steps) + 20}", timeout=300)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert summary["counts"] == {"ok": 3}, summary
    for n, step in enumerate(steps):  # the interrupted jobs continued from their checkpoints
        assert info(sweep_dir / str(n))["attempts"] == 2
        assert step < json.loads((sweep_dir / str(n) / "metrics.json").read_text())["global_step"] <= max(steps) + 20
    assert json.loads((sweep_dir / "2" / "metrics.json").read_text())["global_step"] == max(steps) + 20
