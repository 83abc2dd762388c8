"""A normal run's console: one line per message, no library tips or deprecation warnings, an epoch counter that
counts (not "Epoch 0/-2"), no v_num, and the final metrics as a small table."""

from __future__ import annotations

import os
import re
from pathlib import Path

from conftest import TRAIN, run_script, script_env


def users_shell(tmp_path: Path) -> dict[str, str]:
    """The environment of a user's shell on a machine with SLURM installed: Python's warnings not silenced (the
    tests' own runs silence them) and an `srun` on PATH, outside any SLURM allocation; its console a terminal
    (Rich's FORCE_COLOR: the progress bar is drawn only there, callbacks/lifecycle.py's ProgressBar)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "srun").write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "srun").chmod(0o755)
    env = {key: value for key, value in script_env().items()
           if key != "PYTHONWARNINGS" and not key.startswith("SLURM_")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env['PATH']}"
    env["FORCE_COLOR"] = "1"
    return env


def test_a_normal_run_prints_each_line_once_and_a_final_table(tmp_path: Path):
    # A process (the console of a user's shell: every warning shown); validations during training too.
    proc = run_script(TRAIN, "max_steps=30", "task.train_size=320", "task.val_size=64", "trainer.val_check_interval=10",
                      f"hydra.run.dir={tmp_path / 'run'}", check=True, env=users_shell(tmp_path))
    out = proc.stdout + proc.stderr
    log_lines = [line for line in out.splitlines() if line.startswith("[20")]  # Hydra's log format
    messages = [line.split(" - ", 1)[-1] for line in log_lines]
    assert log_lines and len(messages) == len(set(messages)), "\n".join(log_lines)
    assert not re.search(r"warn|deprecat|tip:|💡", out, re.IGNORECASE), out[-3000:]
    assert "site-packages" not in out, out[-3000:]  # a library's warning names its own file, whatever its words
    epochs = {(int(a), int(b)) for a, b in re.findall(r"Epoch (\d+)/(-?\d+)", out)}
    # 320 examples / 64 = 5 batches an epoch: 30 steps are 6 epochs, 0..5.
    assert epochs and all(total == 5 for _, total in epochs), epochs
    assert "v_num" not in out
    table = out[out.index("final metrics of"):]
    assert re.search(r"^  val/seq_acc\s+\d\.\d{4}$", table, re.MULTILINE), table
    assert re.search(r"^  global_step\s+30$", table, re.MULTILINE), table
