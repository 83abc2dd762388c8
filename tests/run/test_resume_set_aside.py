"""A signal while ``resume=<sweep dir>`` moves a failed attempt aside (``sweep_resume.set_aside``) loses nothing:
the attempt's files are all in ``<job>/attempt<n>/`` or all still in place, never half moved; the sweep stops in
one line with the documented exit status; and the next resume completes the sweep.

Only a process shows this: the resume runs as one, with an audit hook (``sys.addaudithook``: an observer the
interpreter calls before each ``os.rename``; nothing of the lab's is patched) that acts in the middle of the move,
after the first file went aside and before the next: it notes what is aside so far, then sends the test's signals to
its own process (``os.kill``, as a ``kill`` from outside would), each handled before the next is sent. The signals
land exactly while the move is in progress, in the order given (two signals sent from outside at once are handled
in the order of their numbers, SIGINT first, whatever order they came in)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from test_records_are_data import copy_of

from attention_lab.records.commands import script_command
from conftest import QUIET, ROOT, TRAIN, run_train_following_exec, script_env

MOVED = ("traceback.txt", "checkpoints", "tensorboard")  # what set_aside moves, in its order

HOOK = '''
import os, sys
from pathlib import Path

NOTED, SIGNUMS = Path({noted!r}), {signums!r}


def signal_in_the_move(event, args):
    """At the rename of checkpoints/ into attempt<n>/ (traceback.txt went before it): note what is aside, signal."""
    target = Path(str(args[1])) if event == "os.rename" else None
    if target is None or target.name != "checkpoints" or not target.parent.name.startswith("attempt") or NOTED.exists():
        return
    NOTED.write_text(" ".join(sorted(p.name for p in target.parent.iterdir())))
    for signum in SIGNUMS:
        os.kill(os.getpid(), signum)  # its handler runs before the next line: Python checks for signals after a call


sys.addaudithook(signal_in_the_move)
'''


def failed_job(sweep_dir: Path, job: str) -> set[str]:
    """Turn the job of a finished sweep into a failed one with a traceback; returns the files set_aside moves."""
    job_dir = sweep_dir / job
    info = json.loads((job_dir / "run_info.json").read_text())
    info.update(status="failed", error="RuntimeError: boom")
    (job_dir / "run_info.json").write_text(json.dumps(info))
    (job_dir / "metrics.json").unlink()
    (job_dir / "traceback.txt").write_text("Traceback (most recent call last):\nRuntimeError: boom\n")
    return files_of(job_dir, MOVED)


def files_of(folder: Path, names: tuple[str, ...]) -> set[str]:
    """The files under ``folder``'s entries ``names``, relative to ``folder``."""
    found = set()
    for name in names:
        path = folder / name
        found |= {str(p.relative_to(folder)) for p in ([path] if path.is_file() else path.rglob("*")) if p.is_file()}
    return found


def hooked_env(hook_dir: Path) -> dict[str, str]:
    """The scripts' environment, with ``hook_dir``'s sitecustomize.py imported at start (ahead of any PYTHONPATH)."""
    env = script_env()
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(hook_dir), env.get("PYTHONPATH")) if p)
    return env


@pytest.mark.parametrize("signums, status", [((signal.SIGTERM,), 128 + signal.SIGTERM),
                                             ((signal.SIGTERM, signal.SIGINT), 128 + signal.SIGINT)],
                         ids=["sigterm", "sigterm_then_ctrl_c"])
def test_a_signal_while_a_failed_attempt_moves_aside_loses_nothing(finished_sweep, tmp_path, signums, status):
    sweep_dir = copy_of(finished_sweep, tmp_path)
    job_dir = sweep_dir / "1"
    attempt = failed_job(sweep_dir, "1")
    hook_dir, noted = tmp_path / "hook", tmp_path / "noted"
    hook_dir.mkdir()
    (hook_dir / "sitecustomize.py").write_text(HOOK.format(noted=str(noted), signums=[int(s) for s in signums]))
    proc = subprocess.run([sys.executable, str(TRAIN), f"resume={sweep_dir}", *QUIET], cwd=ROOT, timeout=300,
                          env=hooked_env(hook_dir), capture_output=True, text=True)
    stdout, stderr = proc.stdout, proc.stderr
    assert noted.read_text() == "run_info.json.previous traceback.txt", "the signals came elsewhere than in the move"

    assert proc.returncode == status, stderr[-3000:]
    assert "Traceback" not in stdout + stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.strip() and not line.endswith(": ok, kept as it is")]
    assert len(lines) == 1 and lines[0].startswith("interrupted: job 1 (heads=2 "), stderr
    assert lines[0].endswith(f"continue with: {script_command('train.py', cwd=ROOT)} resume={sweep_dir} (the whole sweep)"), lines[0]
    assert files_of(job_dir / "attempt1", MOVED) == attempt, "the failed attempt was half moved aside"
    assert not any((job_dir / name).exists() for name in MOVED)

    again = run_train_following_exec(f"resume={sweep_dir}")
    assert again.returncode == 0 and "Traceback" not in again.stderr, again.stderr[-3000:]
    rows = json.loads((sweep_dir / "sweep_summary.json").read_text())["jobs"]
    assert [row["status"] for row in rows] == ["ok", "ok"]
    assert files_of(job_dir / "attempt1", MOVED) == attempt, "the set-aside attempt changed"
    assert (job_dir / "checkpoints" / "last.ckpt").is_file() and (job_dir / "metrics.json").is_file()
