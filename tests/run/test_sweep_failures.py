"""Sweeps lose nothing: a job that fails as it runs (its corpus missing, a nan loss) is recorded as failed with its
error in <sweep dir>/sweep_summary.json (and .csv), the other jobs still run and keep their outputs, and the exit
status says that something failed. (A combination the config rules refuse stops the sweep before any job starts:
tests/run/test_sweep_jobs.py.) A nan loss stops its run with a message naming the step and keeps the
last checkpoint as it was."""

from __future__ import annotations

import csv
import json

import torch

from attention_lab.records.commands import script_command
from conftest import ROOT, run_train

SMALL = ["max_steps=4", "task.train_size=128", "task.val_size=32", "callbacks.attention_maps.images=false",
         "~callbacks.head_score_maps", "ablation=[]"]


def test_failed_jobs_are_recorded_and_the_others_run(tmp_path):
    sweep_dir = tmp_path / "sweep"
    # job 0: fine; job 1: nan loss (lr=1e30); jobs 2, 3: their corpus file is missing (read as the job runs)
    good, missing = ROOT / "src" / "attention_lab" / "data" / "corpus.txt", tmp_path / "missing.txt"
    proc = run_train(sweep_dir, f"task.corpus={good},{missing}", "lr=0.003,1e30", *SMALL, multirun=True, check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert "Traceback" not in proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 4, proc.stderr  # one line per failed job, one for the sweep
    assert "1 ok" in errors[-1] and "3 failed" in errors[-1] and "sweep_summary.json" in errors[-1]
    assert proc.stdout.rstrip().endswith(f"next: {script_command('compare.py')} {sweep_dir}\n"
                                         f"      {script_command('start_tensorboard.py')} {sweep_dir}")

    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert summary["counts"] == {"ok": 1, "failed": 3} and summary["total"] == 4
    jobs = {row["job"]: row for row in summary["jobs"]}
    assert sorted(jobs) == [0, 1, 2, 3]
    for row in jobs.values():
        assert set(row) == {"job", "overrides", "status", "error", "metrics", "output_dir", "wall_time_s"}

    ok = jobs[0]
    assert ok["status"] == "ok" and ok["error"] is None and f"task.corpus={good}" in ok["overrides"]
    assert ok["metrics"]["global_step"] == 4 and "val/seq_acc" in ok["metrics"]
    assert json.loads((sweep_dir / "0" / "metrics.json").read_text()) == ok["metrics"]
    assert (sweep_dir / "0" / "checkpoints" / "last.ckpt").is_file() and (sweep_dir / "0" / "tensorboard").is_dir()

    assert jobs[1]["status"] == "failed" and "diverged" in jobs[1]["error"] and "step" in jobs[1]["error"]
    for num in (2, 3):
        assert jobs[num]["status"] == "failed" and f"task.corpus={missing} is invalid" in jobs[num]["error"]
        assert jobs[num]["metrics"] == {} and not (sweep_dir / str(num) / "metrics.json").exists()

    with open(sweep_dir / "sweep_summary.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [row["status"] for row in rows] == ["ok", "failed", "failed", "failed"]
    assert float(rows[0]["val/seq_acc"]) == ok["metrics"]["val/seq_acc"]


def test_nan_loss_stops_the_run_and_keeps_the_last_checkpoint(tmp_path):
    run_dir = tmp_path / "run"
    # A genuinely diverging config: lr=1e5 blows the weights up within a few steps; a checkpoint every step.
    proc = run_train(run_dir, "lr=1e5", "max_steps=30", "trainer.val_check_interval=1", *SMALL[1:], check=False)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in output, output[-3000:]
    lines = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and "training diverged: the loss is nan at step" in lines[0], proc.stderr
    step = int(lines[0].split(" at step ")[1].split(";")[0])
    assert 1 <= step < 30

    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    saved_at = checkpoint["global_step"]
    assert 1 <= saved_at <= step, "no checkpoint is written once the loss is nan"
    assert all(torch.isfinite(t).all() for t in checkpoint["state_dict"].values() if t.is_floating_point())
    assert f"{run_dir / 'checkpoints' / 'last.ckpt'} (step {saved_at}), is kept as it was" in lines[0]
    assert not (run_dir / "metrics.json").exists()
    info = json.loads((run_dir / "run_info.json").read_text())
    assert info["status"] == "failed" and info["error"] == lines[0].removeprefix("error: ")
