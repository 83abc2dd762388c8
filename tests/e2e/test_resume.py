"""Interrupted runs resume: a real training subprocess gets SIGTERM mid-run, saves a checkpoint and exits
cleanly; `scripts/train.py resume=<run dir>` continues it in the same dir and TensorBoard run, and its final
metrics equal those of an uninterrupted run of the same config."""

from __future__ import annotations

import json
import signal
from pathlib import Path

import torch

from conftest import CONFIG_DIR, run_train, run_train_process, signal_when, start_train

# Mid-epoch on purpose: 256 samples / 64 = 4 batches per epoch; checkpoints every 10 steps; dropout on, so
# that the random state must be restored too.
CONFIG = ["max_steps=40", "task.train_size=256", "task.val_size=64", "trainer.val_check_interval=10",
          "model.dropout=0.1", "callbacks.attention_maps.images=false"]
# For a run whose test looks at no figure and no ablation: the final validation without them.
NO_IMAGES = ["~callbacks.head_score_maps", "ablation=[]"]


def tensorboard_steps(run_dir: Path, metric: str = "train/loss") -> list[list[int]]:
    """Steps of `metric` (under its TensorBoard tag) in each event file of the run's TensorBoard dir, in file
    order."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    from attention_lab.records.files import tensorboard_dir
    from attention_lab.tensorboard_logger import tensorboard_tag

    tag = tensorboard_tag(metric)

    files = sorted(tensorboard_dir(run_dir).glob("events.out.tfevents.*"), key=lambda p: p.name.split(".")[3:])
    steps = []
    for path in files:
        found = [event.step for event in EventFileLoader(str(path)).Load()
                 for value in event.summary.value if value.tag == tag]
        if found:
            steps.append(found)
    return steps


def test_sigterm_then_resume_equals_uninterrupted(tmp_path):
    reference_dir, run_dir = tmp_path / "uninterrupted", tmp_path / "interrupted"
    # The uninterrupted run in-process (the same entry function; one torch thread, the `threads` default, as in the
    # processes); the interrupted one and its resume as a user runs them, in processes of their own.
    run_train(reference_dir, *CONFIG)
    proc = start_train(*CONFIG, f"hydra.run.dir={run_dir}")
    # The first validation, at step 10, writes last.ckpt: training runs.
    stdout, stderr = signal_when(proc, lambda: (run_dir / "checkpoints" / "last.ckpt").exists(), "a checkpoint",
                                 signal.SIGTERM)
    assert proc.returncode == 128 + signal.SIGTERM, stdout[-3000:] + stderr[-3000:]
    assert "Traceback" not in stderr
    message = [line for line in stderr.splitlines() if line.startswith("interrupted: ")]
    assert message and f"resume={run_dir}" in message[0], stderr[-3000:]

    info = json.loads((run_dir / "run_info.json").read_text())
    assert info["status"] == "interrupted" and "SIGTERM" in info["error"]
    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    stopped_at = checkpoint["global_step"]
    assert 10 <= stopped_at < 40 and not (run_dir / "metrics.json").exists()
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]

    resumed = run_train_process(run_dir, f"resume={run_dir}", timeout=300)
    assert "resuming" in resumed.stdout

    # Same run dir, same TensorBoard run, the step count continuing; the same final metrics, byte for byte.
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["global_step"] == 40
    assert (run_dir / "metrics.json").read_text() == (reference_dir / "metrics.json").read_text()
    before, *after = tensorboard_steps(run_dir)
    assert after, "the resumed run logged into the same TensorBoard dir"
    assert max(before) <= stopped_at < min(after[0]) and max(after[-1]) == 39
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
    info = json.loads((run_dir / "run_info.json").read_text())
    assert info["status"] == "ok" and info["attempts"] == 2 and info["wall_time_s"] >= info["previous_wall_time_s"]


def test_ctrl_c_saves_a_checkpoint_and_exits_cleanly(tmp_path):
    run_dir = tmp_path / "run"
    proc = start_train("max_steps=1000", *CONFIG[1:], f"hydra.run.dir={run_dir}")
    _, stderr = signal_when(proc, lambda: (run_dir / "checkpoints" / "last.ckpt").exists(), "a checkpoint",
                            signal.SIGINT)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.startswith("interrupted: ")]
    assert len(lines) == 1 and "SIGINT at step" in lines[0] and f"resume={run_dir}" in lines[0]
    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert f"SIGINT at step {checkpoint['global_step']}:" in lines[0]
    assert json.loads((run_dir / "run_info.json").read_text())["status"] == "interrupted"


def test_finished_run_is_not_resumed_by_accident(tmp_path):
    from attention_lab.errors import ConfigError
    from attention_lab.run.overrides import hydra_compose_api
    from attention_lab.run.resume import plan_resume

    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "overrides.yaml").write_text("- heads=2\n- lr=0.01\n")
    (run_dir / "metrics.json").write_text("{}")
    with hydra_compose_api(CONFIG_DIR):  # a record's overrides are checked against the project's config groups
        try:
            plan_resume(str(run_dir), [f"resume={run_dir}"])
        except ConfigError as err:
            assert "already finished" in str(err) and "max_steps" in str(err)
        else:
            raise AssertionError("a finished run was resumed")
        # Training it further is explicit: the saved overrides, then the new ones, then the run dir.
        plan = plan_resume(str(run_dir), [f"resume={run_dir}", "max_steps=3000"])
    assert plan.compose_overrides == ["heads=2", "lr=0.01", "max_steps=3000", f"resume={run_dir.resolve()}"]


def test_a_finished_run_trained_further_reaches_the_new_max_steps(tmp_path):
    """The epoch count the progress bar shows must never end a resumed run before its max_steps: a run resumed
    at an epoch boundary stopped 3 steps short (57 of 60) when the limit was computed as for a new run."""
    run_dir = tmp_path / "run"
    # In-process: what a process alone shows (the signal, the resume of its checkpoint) is tested above.
    run_train(run_dir, *CONFIG, *NO_IMAGES)  # 40 steps: 10 whole epochs of 4 batches
    run_train(run_dir, f"resume={run_dir}", "max_steps=60")
    assert json.loads((run_dir / "metrics.json").read_text())["global_step"] == 60
