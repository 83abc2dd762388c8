"""The review tools write only where they are told, and a record's text reaches the console and a spreadsheet as
text: a compare.csv, compare.md or visualize/ that links elsewhere is never written through; a control sequence in
an override is not sent to the terminal; sweep_summary.csv escapes formula cells as compare.csv does."""

from __future__ import annotations

import csv
import json
import runpy
import shutil

import pytest
from test_compare import write_job

from attention_lab.errors import ReviewError
from attention_lab.review.compare import write_reports
from attention_lab.review.sweep import collect_sweep
from attention_lab.review.visualize import visualize
from attention_lab.run.sweep_summary import write_summary
from conftest import ROOT

COMPARE = ROOT / "scripts" / "compare.py"
TITLE = "\x1b]0;pwned\x07"  # OSC 0: a terminal sets its window title to "pwned"
FORMULA = "=cmd|' /C calc'!A0"  # DDE: a spreadsheet that runs it starts calc


def two_jobs(sweep, overrides=("x=1", "x=2"), error="boom"):
    write_job(sweep, 0, ["max_steps=60", overrides[0]], run_info={"status": "ok", "wall_time_s": 2.0},
              metrics={"val/seq_acc": 0.5, "val/loss": 0.7, "global_step": 60, "params": 1234})
    write_job(sweep, 1, ["max_steps=60", overrides[1]], run_info={"status": "failed", "error": error})
    return sweep


@pytest.mark.parametrize("name", ["compare.csv", "compare.md", "compare.png"])
def test_a_report_linked_to_a_file_elsewhere_is_replaced_not_written_through(tmp_path, name):
    sweep = two_jobs(tmp_path / "sweep")
    elsewhere = tmp_path / "users_folder"
    elsewhere.mkdir()
    marker = elsewhere / "notes.txt"
    marker.write_text("mine\n")
    (sweep / name).symlink_to(marker)
    (sweep / "compare.md" if name != "compare.md" else sweep / "compare.csv").symlink_to(elsewhere / "new.txt")
    paths = write_reports(collect_sweep(sweep), sweep)
    assert marker.read_text() == "mine\n", "a report was written through a link"
    assert sorted(p.name for p in elsewhere.iterdir()) == ["notes.txt"], "a dangling link created a file elsewhere"
    assert all(path.is_file() and not path.is_symlink() for path in paths.values())
    assert sorted(p.name for p in sweep.iterdir() if p.name.startswith(".")) == [], "a temp file was left"


def test_a_linked_visualize_dir_is_refused(tiny_trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_trained_run, run, ignore=shutil.ignore_patterns("visualize"))
    elsewhere = tmp_path / "users_folder"
    elsewhere.mkdir()
    (run / "visualize").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(ReviewError, match=r"\(no --out given\) is invalid: the run's visualize is a symlink to the "
                                          r"folder .*users_folder.*--out DIR"):
        visualize(run, "Life is short")
    assert list(elsewhere.iterdir()) == [], "the maps were written through the link"
    result = visualize(run, "Life is short", out=tmp_path / "maps")  # --out: the user's choice, as before
    assert result["png"].parent == tmp_path / "maps" and list(elsewhere.iterdir()) == []


def test_a_control_sequence_in_an_override_is_not_printed(tmp_path, capsys):
    sweep = two_jobs(tmp_path / "sweep", overrides=(f"x={TITLE}", "x=2"), error=f"failed {TITLE} here")
    (sweep / "0" / "metrics.json").write_text(json.dumps({"val/seq_acc": 0.5, "global_step": 60, "params": 1}))
    main = runpy.run_path(str(COMPARE))["main"]
    assert main([str(sweep)]) == 0
    out, err = capsys.readouterr()
    assert "]0;pwned" in out, out  # the text is shown...
    assert "\x1b" not in out + err and "\x07" not in out + err  # ...without the characters that make it a command


def test_sweep_summary_csv_escapes_formula_cells(tmp_path):
    sweep = two_jobs(tmp_path / "sweep", error=FORMULA)
    write_job(sweep, 2, [FORMULA], run_info={"status": "failed", "error": "-2+3"})
    write_summary(sweep)
    with (sweep / "sweep_summary.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert [(row["job"], row["overrides"], row["error"]) for row in rows] == [
        ("0", "max_steps=60 x=1", ""), ("1", "max_steps=60 x=2", "'" + FORMULA), ("2", "'" + FORMULA, "'-2+3")]
    assert float(rows[0]["val/loss"]) == 0.7  # numbers stay numbers
    cells = [cell for row in rows for cell in row.values()]
    assert not any(cell.startswith(("=", "+", "-", "@", "\t", "\r")) for cell in cells), cells
