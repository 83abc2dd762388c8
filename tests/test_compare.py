"""scripts/compare.py on a real 2-job sweep whose first job fails (Lightning rejects trainer.devices=0)."""

from __future__ import annotations

import csv
import json
import shutil
import time

import pytest
from PIL import Image

from attention_lab.review.cli import ReviewError
from attention_lab.review.compare import collect_sweep, format_seconds, load_summary, to_markdown
from conftest import ROOT, run_script, run_train

COMPARE = ROOT / "scripts" / "compare.py"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    sweep_dir = tmp_path_factory.mktemp("sweep") / "sweep"
    # Job 0 fails when the Trainer is built; job 1 trains. The sweep itself exits non-zero.
    run_train(sweep_dir, "trainer.devices=0,1", "max_steps=60", "task.train_size=256", "task.val_size=64",
              "~callbacks.attention_maps", multirun=True, check=False)
    assert (sweep_dir / "1" / "metrics.json").is_file(), "the good job of the sweep did not finish"
    return sweep_dir


def copy_of(sweep, tmp_path):
    target = tmp_path / "sweep"
    shutil.copytree(sweep, target, ignore=shutil.ignore_patterns("*.ckpt", "tensorboard", "compare.*"))
    return target


def test_compare_script_reports_every_job(sweep, tmp_path):
    sweep = copy_of(sweep, tmp_path)
    proc = run_script(COMPARE, str(sweep), timeout=120, check=True)
    rows = {line.split("│")[1].strip(): line for line in proc.stdout.splitlines() if line.startswith("│")}
    assert "trainer.devices=0" in rows["0"] and "failed" in rows["0"]
    assert "trainer.devices=1" in rows["1"] and " ok " in rows["1"]
    assert "1 ok, 1 failed" in proc.stdout

    metrics = json.loads((sweep / "1" / "metrics.json").read_text())
    with (sweep / "compare.csv").open() as f:
        table = list(csv.DictReader(f))
    assert [(r["job"], r["overrides"], r["status"]) for r in table] == [
        ("0", "trainer.devices=0", "failed"), ("1", "trainer.devices=1", "ok")]
    good, bad = table[1], table[0]
    assert float(good["val/seq_acc"]) == pytest.approx(metrics["val/seq_acc"])
    assert float(good["val/loss"]) == pytest.approx(metrics["val/loss"])
    assert int(good["params"]) == metrics["params"] and good["best"] == "True"
    assert float(good["wall_time_s"]) > 0
    assert bad["val/seq_acc"] == "" and bad["error"]
    if (sweep / "sweep_summary.json").is_file():  # the sweep recorded the job's exception
        assert "devices=0" in bad["error"]
    assert "max_steps=60" in good["all_overrides"]

    markdown = (sweep / "compare.md").read_text()
    assert "| job | overrides | status | val/seq_acc |" in markdown
    assert "| 0 | `trainer.devices=0` | failed |" in markdown and "| 1 | `trainer.devices=1` | ok |" in markdown
    with Image.open(sweep / "compare.png") as image:
        assert image.size[0] > 400 and image.size[1] > 150


def test_running_and_stale_jobs(sweep, tmp_path):
    """A job without metrics whose files are fresh is running (time so far); untouched for long, stale."""
    sweep = copy_of(sweep, tmp_path)
    running = sweep / "2"
    shutil.copytree(sweep / "1" / ".hydra", running / ".hydra")
    (running / "train.log").write_text("[INFO] - training\n")
    jobs = {job.id: job for job in collect_sweep(sweep).jobs}
    assert (jobs["0"].status, jobs["1"].status, jobs["2"].status) == ("failed", "ok", "running")
    assert jobs["2"].wall_time_s is not None and not jobs["2"].metrics
    assert "so far" in to_markdown(collect_sweep(sweep))
    later = collect_sweep(sweep, now=time.time() + 3600, stale_minutes=30)
    assert later.jobs[2].status == "stale"


def test_summary_and_run_info_are_used(sweep, tmp_path):
    """Status/error from sweep_summary.json and wall time from run_info.json, when a sweep has them."""
    sweep = copy_of(sweep, tmp_path)
    metrics = json.loads((sweep / "1" / "metrics.json").read_text())
    metrics.pop("wall_time_s", None)
    (sweep / "1" / "metrics.json").write_text(json.dumps(metrics))
    (sweep / "1" / "run_info.json").write_text(json.dumps({"wall_time_s": 12.5, "status": "completed"}))
    summary = {"jobs": [{"num": 0, "status": "FAILED", "error": "Traceback ...\nValueError: boom"},
                        {"num": 1, "status": "COMPLETED", "metrics": metrics}]}
    (sweep / "sweep_summary.json").write_text(json.dumps(summary))
    assert set(load_summary(sweep)) >= {"0", "1"}
    result = collect_sweep(sweep)
    assert [(j.status, j.error) for j in result.jobs] == [("failed", "ValueError: boom"), ("ok", "")]
    assert result.jobs[1].wall_time_s == 12.5 and result.jobs[1].best


def test_bad_sweep_dir_fails_with_one_line(tmp_path):
    for target in (tmp_path / "missing", tmp_path):
        proc = run_script(COMPARE, str(target), timeout=60)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    with pytest.raises(ReviewError, match="no job directories"):
        collect_sweep(tmp_path)


def test_format_seconds():
    assert [format_seconds(s) for s in (None, 3.21, 75, 3725)] == ["—", "3.2 s", "1m 15s", "1h 02m"]
