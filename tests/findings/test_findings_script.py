"""scripts/findings.py: ``check --sweep`` on a small sweep dir written by hand, as a sweep of scripts/train.py leaves
one (nothing trains), ``list``, and bad input as one line before any work starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from attention_lab.findings.catalogue import FINDINGS as FINDINGS_DECLARED
from attention_lab.findings.checks import listing
from conftest import ROOT, run_in_process

FINDINGS = ROOT / "scripts" / "findings.py"


def write_job(sweep_dir: Path, job: int, overrides: list[str], metrics: dict) -> None:
    job_dir = sweep_dir / str(job)
    (job_dir / ".hydra").mkdir(parents=True)
    (job_dir / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in overrides))
    (job_dir / ".hydra" / "config.yaml").write_text("optimized_metric: val/seq_acc\n")
    (job_dir / "run_info.json").write_text(json.dumps({"job": job, "overrides": overrides, "status": "ok",
                                                        "error": None, "attempts": 1, "wall_time_s": 12.5}))
    (job_dir / "metrics.json").write_text(json.dumps(metrics))


@pytest.fixture
def smeared_sweep(tmp_path) -> Path:
    """smeared_keys on seeds 10 and 11: with smeared keys both solve; without, seed 11's in-context score leaves the
    docs' range (-0.32 to -0.12)."""
    sweep = tmp_path / "sweep"
    plain = {10: -0.2, 11: -0.05}
    for i, (seed, smeared) in enumerate([(10, False), (10, True), (11, False), (11, True)]):
        metrics = {"val/seq_acc": 0.999 if smeared else 0.6, "val/in_context_score": 0.001 if smeared else plain[seed],
                   "steps_to_solve": 150 if smeared else None,
                   "head_score/induction/layer0/head0": 0.75 if smeared else 0.52}
        write_job(sweep, i, ["experiment=induction_formation", "layers=1", f"seed={seed}", f"smeared_keys={smeared}"],
                  metrics)
    return sweep


def test_check_a_sweep_that_ran(smeared_sweep):
    before = sorted(p.relative_to(smeared_sweep) for p in smeared_sweep.rglob("*"))
    proc = run_in_process(FINDINGS, "check", "smeared_keys", "--sweep", str(smeared_sweep))
    lines = proc.stdout.splitlines()
    assert lines[0] == "smeared_keys: 4 finished jobs, seeds 10,11"
    assert "held: smeared_keys=true: steps_to_solve set in at least 10 of 10 seeds: 2 of 2 (needed 2)" in lines
    assert "held: smeared_keys=false: steps_to_solve unset in at least 10 of 10 seeds: 2 of 2 (needed 2)" in lines
    assert ("NOT HELD: smeared_keys=false: val/in_context_score in -0.32 to -0.12 (seeds 0-9): -0.2 to -0.05 over 2 "
            "jobs; outside: seed 11: -0.05") in lines
    # head_score/<kind>/max is the best head of any layer, as compare.py reads it
    assert "held: smeared_keys=true: head_score/induction/max in 0.72 to 0.78 (seeds 0-9): 0.75 to 0.75 over 2 jobs" \
        in lines
    assert proc.returncode == 1  # a claim did not hold
    assert sorted(p.relative_to(smeared_sweep) for p in smeared_sweep.rglob("*")) == before  # read only
    refused = run_in_process(FINDINGS, "check", "smeared_keys", "--sweep", str(smeared_sweep), "--record")
    assert refused.stderr == ("error: --record of seeds 10,11 is invalid: the finding's own seeds (0-9): the results "
                              "its claims are stated on\n")


def test_list_names_every_finding_its_cost_or_that_it_has_none(tmp_path):
    proc = run_in_process(FINDINGS, "list", check=True)
    assert "induction_heads: Induction heads: two layers solve what one cannot" in proc.stdout
    assert "  python scripts/train.py -m experiment=length_generalisation seed=0,1,2,3,4" in proc.stdout
    recorded = json.loads((ROOT / "docs" / "results" / "smeared_keys.json").read_text())
    jobs = recorded["jobs"]
    per_job = sum(j["wall_time_s"] for j in jobs) / len(jobs)
    assert f"  cost: {len(jobs)} jobs x {per_job:.1f} s = {len(jobs) * per_job / 60:.1f} min of job time" in proc.stdout
    # a root without docs/results: every finding says it has none
    assert listing(tmp_path).count("  cost: no recorded results") == len(FINDINGS_DECLARED)


@pytest.mark.parametrize("args, says", [
    (["check", "smeard_keys"], "error: finding 'smeard_keys' is invalid: no such finding; did you mean smeared_keys?"),
    (["check", "sinks", "--seeds", "5-2"], "error: --seeds '5-2' is invalid: A-B or A,B,..."),
    (["check", "sinks", "--seeds", "1,x"], "error: --seeds '1,x' is invalid: A-B or A,B,..."),
    (["check", "sinks", "--seeds", "0-100"], "at most 100 seeds"),
    (["check", "sinks", "--seeds", "3,3"], "each seed once"),
    (["check", "sinks", "--seeds", "0", "--sweep", "."], "error: --seeds 0 is invalid: not with --sweep"),
    (["check", "sinks", "--sweep", "no/such/dir"], "error: --sweep no/such/dir is invalid: a sweep directory"),
    (["nope"], "error: argument command: invalid choice: 'nope'"),
    (["check", "sinks", "--seeds", "7", "--record"], "error: --record with --seeds 7 is invalid: the finding's own seeds"),
])
def test_bad_input_is_one_line_before_any_work(args, says):
    proc = run_in_process(FINDINGS, *args)
    assert proc.returncode != 0
    assert len(proc.stderr.splitlines()) == 1 and says in proc.stderr, proc.stderr
    assert "running:" not in proc.stdout and "Traceback" not in proc.stderr


def test_check_refuses_an_out_dir_that_holds_a_sweep_before_running(tmp_path):
    (tmp_path / "0").mkdir()
    proc = run_in_process(FINDINGS, "check", "smeared_keys", "--seeds", "10-11", "--out", str(tmp_path))
    assert proc.returncode == 1 and "running:" not in proc.stdout
    assert proc.stderr == f"error: --out {tmp_path} is invalid: a new folder ({tmp_path / '0'} exists already)\n"


def test_help_names_the_commands():
    proc = run_in_process(FINDINGS, "--help")
    assert proc.returncode == 0
    assert "check smeared_keys --seeds 10-11" in proc.stdout and "--sweep" in proc.stdout
