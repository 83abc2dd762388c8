"""The commands the lab prints for a person to paste run as printed, in the shell that started it.

`make train` runs the venv's interpreter from a shell where, most often, no venv is active; the run's `next:` lines
name the interpreter and scripts so that they work there (attention_lab.records.commands). The end-to-end test needs
processes: make, the run it starts, and each command as a shell runs it."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import QUIET, ROOT, SINGLE_THREAD_ENV, script_env

# A short run (seconds) that writes what the `next:` commands read: a checkpoint and TensorBoard events.
SHORT = ["max_steps=6", "task.train_size=64", "task.val_size=32", "trainer.val_check_interval=3",
         "callbacks.attention_maps.images=false", "~callbacks.head_score_maps", "ablation=[]", "patching=false", *QUIET]
SERVING = re.compile(r"^TensorBoard \S+ at http://\S+ \(Press CTRL\+C to quit\)$", re.MULTILINE)


def shell_env(venv_bin: Path) -> dict[str, str]:
    """The environment of a shell where no venv is active: no VIRTUAL_ENV, the venv's bin dir not on PATH, no
    make of an outer make (its jobserver)."""
    env = {**script_env(), **SINGLE_THREAD_ENV}
    for name in ("VIRTUAL_ENV", "MAKEFLAGS", "MAKELEVEL", "MFLAGS"):
        env.pop(name, None)
    env["PATH"] = os.pathsep.join(folder for folder in env.get("PATH", "").split(os.pathsep)
                                  if folder and Path(os.path.abspath(folder)) != venv_bin)
    return env


def next_commands(output: str) -> list[str]:
    """The commands of the `next:` block: its first line's and each indented line after it."""
    lines = output.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("next: "))
    block = [lines[start].removeprefix("next: ")]
    block += [line.strip() for line in itertools.takewhile(lambda line: line.startswith("      "), lines[start + 1:])]
    return block


def readme_next_lines() -> list[str]:
    """The `next:` block of the README's sample output of `make train`."""
    sample = re.search(r"^```text\n(.*?)^```", (ROOT / "README.md").read_text(), re.MULTILINE | re.DOTALL).group(1)
    lines = sample.splitlines()
    return lines[next(n for n, line in enumerate(lines) if line.startswith("next: ")):]


def run_served(command: str, env: dict[str, str], log_path: Path) -> int:
    """``command`` (it starts TensorBoard) in a shell until TensorBoard says it serves, then a Ctrl-C to its
    process group, as a terminal sends it; returns the exit status."""
    with log_path.open("w") as log:
        proc = subprocess.Popen(["bash", "-c", command], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not SERVING.search(log_path.read_text()):  # the event: TensorBoard's own line, once it listens
            assert proc.poll() is None, f"`{command}` exited {proc.returncode}:\n{log_path.read_text()[-3000:]}"
            assert time.monotonic() < deadline, f"`{command}` did not serve within 120 s"
            time.sleep(0.05)
        os.killpg(proc.pid, signal.SIGINT)
        return proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


@pytest.mark.timeout(300)
def test_the_next_commands_of_make_train_run_as_printed_in_a_shell_without_the_venv(tmp_path):
    if shutil.which("make") is None or shutil.which("bash") is None:
        pytest.skip("make and bash are needed")
    venv = Path(sys.prefix)
    venv_bin = Path(os.path.abspath(sys.executable)).parent
    if venv == Path(sys.base_prefix):
        pytest.skip("the tests do not run in a venv")
    env = shell_env(venv_bin)
    run_dir = tmp_path / "run"
    args = " ".join([*SHORT, f"hydra.run.dir={run_dir}"])
    # The venv the tests run in, as it is: `-o` keeps make from installing into it again when the Makefile or
    # pyproject.toml is newer than its stamp.
    made = subprocess.run(["make", "--no-print-directory", "-o", f"{venv}/.installed", "train", f"VENV={venv}",
                           f"ARGS={args}"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=240)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    output = made.stdout + made.stderr
    commands = next_commands(output)
    assert len(commands) == 2 and "start_tensorboard.py" in commands[0] and "visualize.py" in commands[1], commands
    # The README's sample is what a fresh clone's `make train` prints: the run dir and venv as the README has them.
    python = venv_bin / "python"
    shown = str(python.relative_to(ROOT)) if python.is_relative_to(ROOT) else str(python)
    block = output.splitlines()[output.splitlines().index(f"next: {commands[0]}"):][:len(commands)]
    assert [line.replace(str(run_dir), "outputs/runs/<date>/<time>").replace(shown, ".venv/bin/python")
            for line in block] == readme_next_lines()
    for command in commands:
        if "start_tensorboard.py" in command:
            status = run_served(command, env, tmp_path / "tensorboard.log")
            assert status == 0, (command, (tmp_path / "tensorboard.log").read_text()[-3000:])
        else:
            done = subprocess.run(["bash", "-c", command], cwd=ROOT, env=env, capture_output=True, text=True,
                                  timeout=120)
            assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])
    assert list((run_dir / "visualize").glob("*.png")), "visualize.py wrote no maps"
