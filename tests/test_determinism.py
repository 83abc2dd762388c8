"""Identical reruns: the same config and seed give a byte-identical metrics.json on CPU (wall time lives in
run_info.json). Two runs started in the same second get their own run dirs; nothing is overwritten."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import QUIET, ROOT, TRAIN, script_env

# Dropout on: the random state matters too.
CONFIG = ["max_steps=12", "task.train_size=256", "task.val_size=64", "trainer.val_check_interval=5",
          "model.dropout=0.1", "~callbacks.attention_maps"]


def test_same_config_same_metrics_in_separate_dirs(tmp_path):
    # The default run dir pattern (microseconds) under tmp_path; both runs start at once.
    pattern = f"hydra.run.dir={tmp_path}/${{now:%H-%M-%S-%f}}"
    procs = [subprocess.Popen([sys.executable, str(TRAIN), *CONFIG, *QUIET, pattern], cwd=ROOT, env=script_env(),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    for proc in procs:
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-3000:]

    run_dirs = sorted(p for p in tmp_path.iterdir() if p.is_dir())
    assert len(run_dirs) == 2, "each run has its own dir"
    first, second = ((d / "metrics.json").read_text() for d in run_dirs)
    assert first == second
    metrics = json.loads(first)
    assert "wall_time_s" not in metrics and metrics["global_step"] == 12
    for run_dir in run_dirs:
        info = json.loads((run_dir / "run_info.json").read_text())
        assert info["status"] == "ok" and info["wall_time_s"] > 0 and info["output_dir"] == str(run_dir)
