"""scripts/compare.py on a real 2-job sweep whose first job fails (its loss diverges at once)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
import time

import pytest
from PIL import Image

from attention_lab.errors import ReviewError
from attention_lab.review.compare import format_seconds, format_stat, show_groups, to_markdown
from attention_lab.review.sweep import collect_sweep, load_summary, mean_std, seed_groups
from attention_lab.review.verdict import rank
from conftest import ROOT, run_in_process, run_train, unwritable_out

COMPARE = ROOT / "scripts" / "compare.py"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    sweep_dir = tmp_path_factory.mktemp("sweep") / "sweep"
    # Job 0 diverges at its first step (lr=1e30); job 1 trains. The sweep itself exits non-zero.
    run_train(sweep_dir, "lr=1e30,0.003", "max_steps=4", "task.train_size=64", "task.val_size=32",
              "callbacks.attention_maps.images=false", "~callbacks.head_score_maps", "ablation=[]", multirun=True,
              check=False)
    assert (sweep_dir / "1" / "metrics.json").is_file(), "the good job of the sweep did not finish"
    return sweep_dir


def copy_of(sweep, tmp_path):
    target = tmp_path / "sweep"
    shutil.copytree(sweep, target, ignore=shutil.ignore_patterns("*.ckpt", "tensorboard", "compare.*"))
    return target


def test_compare_script_reports_every_job(sweep, tmp_path):
    sweep = copy_of(sweep, tmp_path)
    proc = run_in_process(COMPARE, str(sweep), check=True)
    rows = {line.split("│")[1].strip(): line for line in proc.stdout.splitlines() if line.startswith("│")}
    assert "lr=1e+30" in rows["0"] and "failed" in rows["0"]
    assert "lr=0.003" in rows["1"] and " ok " in rows["1"]
    assert "1 ok, 1 failed" in proc.stdout

    metrics = json.loads((sweep / "1" / "metrics.json").read_text())
    with (sweep / "compare.csv").open() as f:
        table = list(csv.DictReader(f))
    assert [(r["job"], r["overrides"], r["status"]) for r in table] == [
        ("0", "lr=1e+30", "failed"), ("1", "lr=0.003", "ok")]
    good, bad = table[1], table[0]
    assert float(good["val/seq_acc"]) == pytest.approx(metrics["val/seq_acc"])
    assert float(good["val/loss"]) == pytest.approx(metrics["val/loss"])
    assert int(good["params"]) == metrics["params"] and good["best"] == "False"  # one seed separates nothing
    assert float(good["wall_time_s"]) > 0
    assert bad["val/seq_acc"] == "" and bad["error"]
    if (sweep / "sweep_summary.json").is_file():  # the sweep recorded the job's exception
        assert "diverged" in bad["error"]
    assert "max_steps=4" in good["all_overrides"]

    markdown = (sweep / "compare.md").read_text()
    assert "| job | overrides | status | val/seq_acc |" in markdown
    assert "| 0 | `lr=1e+30` | failed |" in markdown and "| 1 | `lr=0.003` | ok |" in markdown
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
    (sweep / "1" / "run_info.json").write_text(json.dumps({"wall_time_s": 12.5, "status": "ok"}))
    summary = {"jobs": [{"job": 0, "status": "failed", "error": "Traceback ...\nValueError: boom"},
                        {"job": 1, "status": "ok", "metrics": metrics}]}
    (sweep / "sweep_summary.json").write_text(json.dumps(summary))
    assert set(load_summary(sweep)) >= {"0", "1"}
    result = collect_sweep(sweep)
    assert [(j.status, j.error) for j in result.jobs] == [("failed", "ValueError: boom"), ("ok", "")]
    assert result.jobs[1].wall_time_s == 12.5


def test_bad_sweep_dir_fails_with_one_line(tmp_path):
    for target in (tmp_path / "missing", tmp_path):
        proc = run_in_process(COMPARE, str(target))
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    with pytest.raises(ReviewError, match="no job directories"):
        collect_sweep(tmp_path)


def test_format_seconds():
    assert [format_seconds(s) for s in (None, 3.21, 75, 3725)] == ["—", "3.2 s", "1m 15s", "1h 02m"]


# ---------------------------------------------------------------------------------------------- the project's records

def write_job(sweep_dir, job, overrides, *, run_info, metrics=None):
    """A job dir as a sweep of scripts/train.py leaves it: Hydra's .hydra files, run_info.json, metrics.json."""
    job_dir = sweep_dir / str(job)
    (job_dir / ".hydra").mkdir(parents=True)
    (job_dir / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (job_dir / ".hydra" / "config.yaml").write_text("optimized_metric: val/seq_acc\n")
    (job_dir / "run_info.json").write_text(json.dumps({"job": job, "overrides": overrides, "error": None,
                                                        "attempts": 1, **run_info}))
    if metrics is not None:
        (job_dir / "metrics.json").write_text(json.dumps(metrics))
    return job_dir


def gone_pid() -> int:
    """The pid of a process that has exited."""
    return int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)


@pytest.fixture
def written_sweep(tmp_path):
    """Five jobs, one per status a sweep records, plus a job whose process died without a word."""
    import socket

    sweep = tmp_path / "sweep"
    here = socket.gethostname()
    write_job(sweep, 0, ["max_steps=60", "heads=1"], run_info={"status": "ok", "wall_time_s": 3.5},
              metrics={"val/seq_acc": 0.75, "val/loss": 0.5, "global_step": 60, "params": 1234})
    write_job(sweep, 1, ["max_steps=60", "heads=2"], run_info={"status": "ok", "wall_time_s": 4.0},
              metrics={"val/seq_acc": 0.875, "val/loss": 0.25, "global_step": 60, "params": 2345})
    write_job(sweep, 2, ["max_steps=60", "heads=3"],
              run_info={"status": "failed", "error": "model.num_heads=3 is invalid: d_model=48 is not divisible"})
    write_job(sweep, 3, ["max_steps=60", "heads=4"],
              run_info={"status": "interrupted", "error": "SIGTERM at step 20", "wall_time_s": 1.5})
    write_job(sweep, 4, ["max_steps=60", "heads=6"], run_info={"status": "running", "pid": os.getpid(), "host": here})
    write_job(sweep, 5, ["max_steps=60", "heads=8"], run_info={"status": "running", "pid": gone_pid(), "host": here})
    (sweep / "multirun.yaml").write_text("hydra:\n  overrides:\n    task:\n    - max_steps=60\n    - heads=1,2,3,4,6,8\n")
    return sweep


def test_statuses_as_the_sweep_recorded_them(written_sweep):
    result = collect_sweep(written_sweep)
    assert [(j.id, j.configuration, j.status) for j in result.jobs] == [
        ("0", "heads=1", "ok"), ("1", "heads=2", "ok"), ("2", "heads=3", "failed"), ("3", "heads=4", "interrupted"),
        ("4", "heads=6", "running"), ("5", "heads=8", "failed")]
    jobs = result.jobs
    assert rank(result).winner is None  # one seed per configuration separates nothing
    assert (jobs[1].metrics, jobs[1].params, jobs[1].steps, jobs[1].wall_time_s) == (
        {"val/seq_acc": 0.875, "val/loss": 0.25}, 2345, 60, 4.0)
    assert jobs[2].error == "model.num_heads=3 is invalid: d_model=48 is not divisible"
    assert jobs[3].error == "SIGTERM at step 20" and not jobs[3].metrics
    assert jobs[4].wall_time_s is not None and jobs[4].error == ""
    assert "is gone without reporting a result" in jobs[5].error
    assert result.counts() == {"ok": 2, "failed": 2, "interrupted": 1, "running": 1}
    assert result.sweep_overrides == ["max_steps=60", "heads=1,2,3,4,6,8"]
    assert result.common_overrides == ["max_steps=60"]


@pytest.mark.parametrize("case", ["existing_file", "under_a_file", "read_only_dir"])
def test_unwritable_out_fails_with_one_line(written_sweep, tmp_path, case):
    out = unwritable_out(tmp_path, case, "reports")
    proc = run_in_process(COMPARE, str(written_sweep), "--out", str(out))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: --out={out} "), lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert not list(written_sweep.glob("compare.*")) and (tmp_path / "blocker").read_text() == "not a directory\n"


def test_out_dir_is_created(written_sweep, tmp_path):
    out = tmp_path / "reports" / "today"
    proc = run_in_process(COMPARE, str(written_sweep), "--out", str(out), check=True)
    assert sorted(p.name for p in out.iterdir()) == ["compare.csv", "compare.md", "compare.png"]
    assert "2 ok, 2 failed, 1 interrupted, 1 running" in proc.stdout


# ---------------------------------------------------------------------------------------------- seeds

def sample_mean_std(values):
    """Mean and sample standard deviation (n - 1 in the denominator), written out."""
    mean = sum(values) / len(values)
    return mean, (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5


SEED_METRICS = {  # (heads, seed) -> final metrics; (2, 1) failed
    (1, 0): {"val/seq_acc": 0.75, "val/loss": 0.61, "steps_to_solve": None},
    (1, 1): {"val/seq_acc": 0.8125, "val/loss": 0.42, "steps_to_solve": 300},
    (1, 2): {"val/seq_acc": 0.90625, "val/loss": 0.33, "steps_to_solve": 200},
    (2, 0): {"val/seq_acc": 1.0, "val/loss": 0.02, "steps_to_solve": 150},
    (2, 2): {"val/seq_acc": 0.984375, "val/loss": 0.07, "steps_to_solve": 250},
}


@pytest.fixture
def seed_sweep(tmp_path):
    """`train.py -m max_steps=400 heads=1,2 seed=0,1,2`: 2 configurations x 3 seeds, job 4 (heads=2 seed=1) failed."""
    sweep = tmp_path / "sweep"
    summary = []
    for job, (heads, seed) in enumerate((h, s) for h in (1, 2) for s in (0, 1, 2)):
        overrides = ["max_steps=400", f"heads={heads}", f"seed={seed}"]
        metrics = SEED_METRICS.get((heads, seed))
        if metrics is None:
            write_job(sweep, job, overrides, run_info={"status": "failed", "error": "RuntimeError: CUDA out of memory"})
            summary.append({"job": job, "status": "failed", "error": "RuntimeError: CUDA out of memory"})
            continue
        metrics = {**metrics, "global_step": 400, "params": 1000 * heads}
        write_job(sweep, job, overrides, run_info={"status": "ok", "wall_time_s": 2.0}, metrics=metrics)
        summary.append({"job": job, "status": "ok", "metrics": metrics, "wall_time_s": 2.0})
    (sweep / "sweep_summary.json").write_text(json.dumps({"jobs": summary}))
    (sweep / "multirun.yaml").write_text(
        "hydra:\n  overrides:\n    task:\n    - max_steps=400\n    - heads=1,2\n    - seed=0,1,2\n")
    return sweep


def test_seed_groups(seed_sweep):
    sweep = collect_sweep(seed_sweep)
    groups = seed_groups(sweep)
    assert [(g.configuration, g.seeds, [j.id for j in g.jobs]) for g in groups] == [
        ("heads=1", ["0", "1", "2"], ["0", "1", "2"]), ("heads=2", ["0", "1", "2"], ["3", "4", "5"])]
    assert [len(g.ok) for g in groups] == [3, 2] and show_groups(groups)
    for group, heads in zip(groups, (1, 2), strict=True):
        for name in ("val/seq_acc", "val/loss"):
            values = [m[name] for (h, _), m in SEED_METRICS.items() if h == heads]
            mean, std = sample_mean_std(values)
            assert group.values(name) == pytest.approx(values)
            assert mean_std(group.values(name)) == pytest.approx((mean, std))
    # Per job: steps_to_solve as written, null = never solved.
    assert [(j.reports_solve, j.steps_to_solve) for j in sweep.jobs] == [
        (True, None), (True, 300), (True, 200), (True, 150), (False, None), (True, 250)]
    assert groups[0].solve_steps() == ([300, 200], 3) and groups[1].solve_steps() == ([150, 250], 2)


def test_seed_groups_in_the_reports(seed_sweep):
    proc = run_in_process(COMPARE, str(seed_sweep), check=True)
    acc1, acc1_std = sample_mean_std([0.75, 0.8125, 0.90625])
    acc2, acc2_std = sample_mean_std([1.0, 0.984375])
    loss2, loss2_std = sample_mean_std([0.02, 0.07])
    solve1, solve1_std = sample_mean_std([300, 200])
    solve2, solve2_std = sample_mean_std([150, 250])
    cell1 = f"{acc1:.4f} ± {acc1_std:.4f} (n=3)"
    cell2 = f"{acc2:.4f} ± {acc2_std:.4f} (n=2 of 3)"
    assert (cell1, cell2) == ("0.8229 ± 0.0786 (n=3)", "0.9922 ± 0.0110 (n=2 of 3)")  # the numbers by hand
    solve_cell1 = f"2/3 solved, {solve1:.1f} ± {solve1_std:.1f}"  # a mean of step counts: one decimal
    solve_cell2 = f"2/2 solved, {solve2:.1f} ± {solve2_std:.1f} (n=2 of 3)"
    assert (solve_cell1, solve_cell2) == ("2/3 solved, 250.0 ± 70.7", "2/2 solved, 200.0 ± 70.7 (n=2 of 3)")

    # The console: the per-job table (steps_to_solve column), then the grouped one.
    out = proc.stdout
    assert out.index("Seeds: jobs that differ only in seed") > out.index("│ 5 ")
    jobs = {line.split("│")[1].strip(): line for line in out.splitlines() if line.startswith("│")}
    assert "never" in jobs["0"] and " 300 " in jobs["1"] and "failed" in jobs["4"]
    groups = [line for line in out.splitlines() if line.startswith("│ heads=")]
    assert len(groups) == 2
    assert cell1 in groups[0] and solve_cell1 in groups[0] and "3 ok" in groups[0]
    assert cell2 in groups[1] and solve_cell2 in groups[1] and "2 ok, 1 failed" in groups[1]
    assert f"{loss2:.4f} ± {loss2_std:.4f} (n=2 of 3)" in groups[1]

    markdown = (seed_sweep / "compare.md").read_text()
    per_job, seeds = markdown.split("## Seeds")
    assert "| 0 | `heads=1 seed=0` | ok | 0.7500 | 0.6100 | never |" in per_job
    assert "| configuration | seeds | jobs | val/seq_acc | val/loss | steps_to_solve |" in seeds
    # 0.9922 - 0.8229 > 0.0786, the larger std: the seeds separate heads=2, the best
    assert f"| `heads=2` | 0, 1, 2 | 2 ok, 1 failed | {cell2} ★ |" in seeds

    with (seed_sweep / "compare.csv").open() as f:
        per_job_csv = list(csv.DictReader(f))
    assert [r["steps_to_solve"] for r in per_job_csv] == ["never", "300", "200", "150", "", "250"]
    with (seed_sweep / "compare_groups.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [(r["configuration"], r["seeds"], r["jobs"], r["ok"]) for r in rows] == [
        ("heads=1", "0 1 2", "3", "3"), ("heads=2", "0 1 2", "3", "2")]
    assert float(rows[0]["val/seq_acc_mean"]) == pytest.approx(acc1)
    assert float(rows[0]["val/seq_acc_std"]) == pytest.approx(acc1_std)
    assert float(rows[1]["val/loss_mean"]) == pytest.approx(loss2)
    assert float(rows[1]["val/loss_std"]) == pytest.approx(loss2_std)
    assert (rows[1]["val/seq_acc_n"], rows[0]["solved"], rows[0]["solve_reported"]) == ("2", "2", "3")
    assert float(rows[0]["steps_to_solve_mean"]) == pytest.approx(solve1)
    assert float(rows[1]["steps_to_solve_std"]) == pytest.approx(solve2_std)


def test_format_stat():
    assert format_stat([0.5], 1) == "0.5000 (n=1)"
    assert format_stat([0.5], 3) == "0.5000 (n=1 of 3)"
    assert format_stat([], 2) == "— (n=0 of 2)"
    assert format_stat([1.0, 2.0, 4.0], 3) == f"2.3333 ± {(((1 - 7 / 3) ** 2 + (2 - 7 / 3) ** 2 + (4 - 7 / 3) ** 2) / 2) ** 0.5:.4f} (n=3)"


def test_one_seed_per_configuration_has_no_grouped_view(written_sweep):
    assert not show_groups(seed_groups(collect_sweep(written_sweep)))


def test_best_head_score_column_on_request(tmp_path):
    """--metric head_score/<kind>/max: each job's highest score of that kind over every layer and head."""
    sweep = tmp_path / "sweep"
    scores = {0: {"head_score/induction/layer0/head0": 0.2, "head_score/induction/layer0/head1": 0.55},
              1: {"head_score/induction/layer0/head0": 0.3, "head_score/induction/layer1/head1": 0.81,
                  "head_score/previous_token/layer0/head0": 0.9}}
    for job, extra in scores.items():
        metrics = {"val/seq_acc": 0.5, "global_step": 10, "params": 100, **extra}
        write_job(sweep, job, [f"layers={job + 1}"], run_info={"status": "ok"}, metrics=metrics)
    assert "head_score/induction/max" not in collect_sweep(sweep).metric_names  # narrow tables by default
    chosen = collect_sweep(sweep, metric="head_score/induction/max")
    assert chosen.metric_names[0] == "head_score/induction/max"
    assert [j.metrics["head_score/induction/max"] for j in chosen.jobs] == [0.55, 0.81]
    assert "head_score/previous_token/max" not in chosen.jobs[0].metrics
    assert (chosen.metric, chosen.direction) == ("head_score/induction/max", "maximize")


# ---------------------------------------------------------------------------------------------- compare.png

def tied_sweep(tmp_path, steps_to_solve):
    """Three jobs that all solved the task (val/seq_acc 1.0), at the given steps."""
    sweep = tmp_path / "sweep"
    for job, (heads, steps) in enumerate(zip((1, 2, 4), steps_to_solve, strict=True)):
        write_job(sweep, job, [f"heads={heads}"], run_info={"status": "ok", "wall_time_s": 2.0},
                  metrics={"val/seq_acc": 1.0, "val/loss": 0.01, "steps_to_solve": steps, "global_step": 600})
    return sweep


def chart_texts(sweep_dir):
    from attention_lab.review.compare_chart import bar_figure

    (ax,) = bar_figure(collect_sweep(sweep_dir)).axes
    return ax.get_title(), ax.get_xlabel(), [text.get_text() for text in ax.texts]


def test_a_chart_of_jobs_that_tie_draws_the_metric_that_tells_them_apart(tmp_path):
    title, xlabel, labels = chart_texts(tied_sweep(tmp_path, (550, 250, 150)))
    assert labels == ["550", "250", "150"]  # one seed each: none is separated from the others
    assert xlabel == "steps_to_solve (lower is better)"
    assert title.startswith("steps_to_solve per configuration (val/seq_acc ties at 1.000 · no best: one seed per "
                            "configuration)")


def test_a_chart_of_jobs_that_tie_on_every_metric_says_so(tmp_path):
    title, _, labels = chart_texts(tied_sweep(tmp_path, (250, 250, 250)))
    assert labels == ["1.000", "1.000", "1.000"]  # no job is the best of equals
    assert ("(every job ties: val/seq_acc ties at 1.000; no other metric tells them apart (steps_to_solve, "
            "val/loss) · no best: one seed per configuration)") in title


def test_a_chart_of_jobs_that_differ_draws_the_optimized_metric(written_sweep):
    title, xlabel, labels = chart_texts(written_sweep)
    assert xlabel == "val/seq_acc (higher is better)" and "ties" not in title
    assert labels == ["0.750", "0.875", "failed", "interrupted", "running", "failed"]
