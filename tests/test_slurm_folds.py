"""A folded product sweep on SLURM: the sweeper hands submitit only the distinct jobs (one array task each), and
says which combination was folded into which. Uses tests/test_slurm.py's one-node cluster (skipped without it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from test_slurm import TINY, cancel, cluster, finish, job_ids, start_sweep  # noqa: F401 - cluster: its fixture

FOLD_LINE = "folded: model=self heads=2 into job 0 (model=self heads=1): with model=self, nothing reads heads"


@pytest.mark.timeout(300)
def test_a_folded_sweep_submits_each_distinct_job_once(tmp_path: Path):
    sweep_dir = tmp_path / "sweep"
    sweep = start_sweep(sweep_dir, *TINY, "model=self,multihead", "heads=1,2")
    try:
        output = finish(sweep)
        assert sweep.returncode == 0, output[-3000:]
        assert FOLD_LINE in output
        assert len(job_ids(sweep_dir)) == 3
    finally:
        cancel(job_ids(sweep_dir))
    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert (summary["total"], summary["counts"]) == (3, {"ok": 3})
    shown = [{o for o in row["overrides"] if o.startswith(("model=", "heads="))} for row in summary["jobs"]]
    assert shown == [{"model=self", "heads=1"}, {"model=multihead", "heads=1"}, {"model=multihead", "heads=2"}]
    assert [fold["into"] for fold in summary["folded"]] == [0]
