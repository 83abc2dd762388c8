"""docs/experiments.md's findings table is what ``make docs`` writes from the declared claims and docs/results/:
stale when a results file changes, and a results file of another shape is one line naming the file."""

from __future__ import annotations

import json
import shutil

import pytest

from attention_lab.docs_tables import MARKED
from attention_lab.findings.errors import FindingError
from attention_lab.findings.tables import findings_table
from conftest import ROOT


def marked_table(text: str, name: str) -> str:
    return next(m.group(3) for m in MARKED.finditer(text) if m.group(2) == name).rstrip("\n")


def test_experiments_md_holds_the_current_findings_table():
    text = (ROOT / "docs" / "experiments.md").read_text(encoding="utf-8")
    assert marked_table(text, "findings") == findings_table(ROOT), "the findings table is stale; run make docs"


@pytest.fixture
def results_root(tmp_path):
    (tmp_path / "docs").mkdir()
    shutil.copytree(ROOT / "docs" / "results", tmp_path / "docs" / "results")
    return tmp_path


def test_a_changed_result_changes_the_table(results_root):
    path = results_root / "docs" / "results" / "smeared_keys.json"
    record = json.loads(path.read_text())
    unsolved = next(job for job in record["jobs"] if job["overrides"]["smeared_keys"] == "True")
    unsolved["metrics"]["steps_to_solve"] = None  # one smeared-keys seed no longer solves
    path.write_text(json.dumps(record))
    rows = findings_table(results_root).splitlines()
    assert rows != findings_table(ROOT).splitlines()
    row = next(r for r in rows if "smeared_keys=true: steps_to_solve set in at least 10 of 10 seeds" in r)
    assert f"**not held**: 9 of 10 (needed 10); not: seed {unsolved['overrides']['seed']}: null" in row


def test_a_finding_without_results_says_so(results_root):
    (results_root / "docs" / "results" / "smeared_keys.json").unlink()
    rows = [r for r in findings_table(results_root).splitlines() if "[`smeared_keys`]" in r]
    assert rows and all("| no recorded results |" in r for r in rows)


def test_a_results_file_of_another_shape_is_one_line(results_root):
    (results_root / "docs" / "results" / "smeared_keys.json").write_text(json.dumps({"jobs": {"0": 1}}))
    with pytest.raises(FindingError) as refused:
        findings_table(results_root)
    assert str(refused.value).endswith("smeared_keys.json: jobs is invalid: a list of objects with overrides, "
                                       "metrics and wall_time_s")
