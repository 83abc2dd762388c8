"""A sweep over a product runs each distinct run once: ``-m model=self,multihead heads=1,2`` trains three jobs,
says before the first one which combination was folded into which and why, records it in the sweep summary and
in compare.py's report, and plans the same jobs under the same numbers when it is resumed (with another launcher
too: the fold is the sweeper's, before any launcher)."""

from __future__ import annotations

import json
import shutil

from conftest import QUIET, ROOT, TINY_JOB, TRAIN, run_in_process, run_script, run_train

FOLD_LINE = "folded: model=self heads=2 into job 0 (model=self heads=1): with model=self, nothing reads heads"


def test_a_folded_sweep_runs_each_job_once_and_resumes_with_the_same_plan(tmp_path):
    sweep_dir = tmp_path / "sweep"
    proc = run_train(sweep_dir, "model=self,multihead", "heads=1,2", *TINY_JOB, multirun=True)
    output = proc.stdout + proc.stderr
    assert output.count("folded: ") == 1 and FOLD_LINE in output
    assert output.index(FOLD_LINE) < output.index("#0 : model=self heads=1")
    assert sorted(p.name for p in sweep_dir.iterdir() if p.is_dir()) == ["0", "1", "2"]

    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert summary["counts"] == {"ok": 3} and summary["total"] == 3
    assert [row["overrides"][:2] for row in summary["jobs"]] == [
        ["model=self", "heads=1"], ["model=multihead", "heads=1"], ["model=multihead", "heads=2"]]
    (fold,) = summary["folded"]
    assert fold["into"] == 0 and fold["reason"] == "with model=self, nothing reads heads"
    assert fold["overrides"][:2] == ["model=self", "heads=2"] and fold["into_overrides"][:2] == ["model=self", "heads=1"]

    report = run_in_process(ROOT / "scripts" / "compare.py", str(sweep_dir), "--out", str(tmp_path))
    assert report.returncode == 0, report.stderr[-2000:]
    assert "folded: model=self heads=2 into job 0: with model=self, nothing reads heads" in report.stdout
    assert "folded: model=self heads=2 into job 0" in (tmp_path / "compare.md").read_text()

    # Job 2 never ran (its dir is gone): the resume, on the parallel launcher, plans the same three jobs.
    shutil.rmtree(sweep_dir / "2")
    kept = (sweep_dir / "0" / "metrics.json").read_bytes()
    again = run_script(TRAIN, f"resume={sweep_dir}", "hydra/launcher=parallel", *QUIET, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert FOLD_LINE in again.stdout + again.stderr
    assert sorted(p.name for p in sweep_dir.iterdir() if p.is_dir()) == ["0", "1", "2"]
    rows = json.loads((sweep_dir / "sweep_summary.json").read_text())["jobs"]
    assert [(row["job"], row["status"], row["overrides"][:2]) for row in rows] == [
        (0, "ok", ["model=self", "heads=1"]), (1, "ok", ["model=multihead", "heads=1"]),
        (2, "ok", ["model=multihead", "heads=2"])]
    assert (sweep_dir / "0" / "metrics.json").read_bytes() == kept


def test_a_folded_sweep_with_an_impossible_job_is_refused_before_anything_runs(tmp_path):
    sweep_dir = tmp_path / "sweep"
    proc = run_train(sweep_dir, "model=self,multihead", "heads=1,5", *TINY_JOB, multirun=True, check=False)
    assert proc.returncode == 1
    (line,) = proc.stderr.strip().splitlines()  # the config rules' own line for heads=5 (their wording is theirs)
    assert line.startswith("error: heads=5 ") and "model=multihead" in line and "d_model=48" in line
    assert not sweep_dir.exists()
