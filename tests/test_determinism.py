"""Identical reruns: on one machine, with one torch build, the same config, seed and ``threads`` give a
byte-identical metrics.json (wall time lives in run_info.json) and bit-identical weights and optimizer state in
last.ckpt, with one thread and with two. Two runs started in the same second get their own run dirs; nothing is
overwritten. (Across machines, torch builds or thread counts the floating-point sums may run in another order:
docs/experiments.md says what carries over.)"""

from __future__ import annotations

import json
import os

import torch

from conftest import run_train, start_train

# Dropout on: the random state matters too.
CONFIG = ["max_steps=12", "task.train_size=256", "task.val_size=64", "trainer.val_check_interval=5",
          "model.dropout=0.1", "callbacks.attention_maps.images=false"]


def assert_bit_identical(first, second, where: str = "") -> None:
    """Two checkpoint entries (nested dicts and lists of tensors and plain values) hold the same bits."""
    if isinstance(first, torch.Tensor):
        assert isinstance(second, torch.Tensor) and first.dtype == second.dtype and torch.equal(first, second), where
    elif isinstance(first, dict):
        assert first.keys() == second.keys(), where
        for key in first:
            assert_bit_identical(first[key], second[key], f"{where}/{key}")
    elif isinstance(first, (list, tuple)):
        assert len(first) == len(second), where
        for i, (a, b) in enumerate(zip(first, second, strict=True)):
            assert_bit_identical(a, b, f"{where}[{i}]")
    else:
        assert first == second, where


def assert_identical_runs(run_dirs: list) -> None:
    assert len(run_dirs) == 2, "each run has its own dir"
    first, second = ((d / "metrics.json").read_text() for d in run_dirs)
    assert first == second
    metrics = json.loads(first)
    assert "wall_time_s" not in metrics and metrics["global_step"] == 12
    for run_dir in run_dirs:
        info = json.loads((run_dir / "run_info.json").read_text())
        assert info["status"] == "ok" and info["wall_time_s"] > 0 and info["output_dir"] == str(run_dir)
        assert 0 < info["cpu_time_s"] <= info["wall_time_s"] * (os.cpu_count() or 1)  # threads summed
    first, second = (torch.load(d / "checkpoints" / "last.ckpt", weights_only=True) for d in run_dirs)
    for entry in ("state_dict", "optimizer_states"):
        assert_bit_identical(first[entry], second[entry], entry)
    assert first["state_dict"] and first["global_step"] == second["global_step"] == 12


def test_same_config_same_metrics_in_separate_dirs(tmp_path):
    # Two processes started at once, with the default run dir pattern (microseconds) under tmp_path.
    pattern = f"hydra.run.dir={tmp_path}/${{now:%H-%M-%S-%f}}"
    procs = [start_train(*CONFIG, "threads=1", pattern) for _ in range(2)]
    for proc in procs:
        _, stderr = proc.communicate(timeout=300)
        assert proc.returncode == 0, stderr[-3000:]
    assert_identical_runs(sorted(p for p in tmp_path.iterdir() if p.is_dir()))


def test_same_config_same_metrics_with_two_threads(tmp_path):
    # The same entry function in this process, one run after the other: what two threads sum must repeat too.
    for name in ("a", "b"):
        run_train(tmp_path / name, *CONFIG, "threads=2")
    assert_identical_runs([tmp_path / "a", tmp_path / "b"])
