"""A sweep's jobs are known before it starts: two jobs that would train the same run, or write to the same dir,
are refused in one line before anything is created."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from attention_lab.errors import ConfigError
from attention_lab.run.preflight import check_command_line
from attention_lab.run.sweep_jobs import planned_jobs
from conftest import CONFIG_DIR, TRAIN, run_script


@pytest.mark.parametrize("arguments", [
    ["model=self,multihead", "heads=1,2,4"],
    ["heads=1,2", "+task.delay=1", "heads=3,4", "~logger", "seed=range(0,3)"],  # a key given again keeps its place
    ["mask=none,causal", "model=self"],
], ids=" ".join)
def test_the_planned_jobs_are_the_basic_sweepers(arguments):
    # Hydra's own expansion, read here only as the reference the lab's copy must match, job for job.
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    parsed = OverridesParser.create().parse_overrides(arguments)
    assert planned_jobs(arguments) == BasicSweeper.split_arguments(parsed, None)[0]


@pytest.mark.parametrize(("argv", "fragment"), [
    (["model=self", "heads=1,2,4"], "heads=1,2,4 is invalid in this sweep: jobs 0, 1, 2 (heads=1 | heads=2 | heads=4)"),
    (["model=self,multihead", "heads=1,2"], "heads=1,2 is invalid in this sweep: with model=self, jobs 0, 1"),
    (["hydra.sweep.subdir=same", "heads=1,2"], "hydra.sweep.subdir=same is invalid: jobs 0 and 1 would both write"),
    (["hydra.sweep.subdir=${heads}", "heads=1,2", "lr=0.1,0.2"], "jobs 0 and 1 would both write to <sweep dir>/1"),
    (["hparams_search=optuna", "hydra.sweep.subdir=trial"], "hydra.sweep.subdir=trial is invalid"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_sweeps_that_would_repeat_a_run_or_share_a_dir_are_refused(argv, fragment):
    with pytest.raises(ConfigError) as info:
        check_command_line(["-m", *argv], CONFIG_DIR)
    assert fragment in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("argv", [
    ["heads=1,2", "seed=0,1"],
    ["model=self,multihead"],
    ["model=multihead", "kv_heads=4,2,1"],
    ["experiment=mask_ablation"],
    ["hparams_search=optuna"],
    ["hydra.sweep.subdir=${hydra.job.override_dirname}", "heads=1,2", "lr=0.1,0.2"],
], ids=" ".join)
def test_sweeps_of_distinct_runs_pass(argv):
    check_command_line(["-m", *argv], CONFIG_DIR)


def test_the_command_line_refuses_a_repeating_sweep_before_creating_anything(tmp_path: Path):
    sweep = tmp_path / "sweep"
    proc = run_script(TRAIN, "-m", "model=self", "heads=1,2,4", f"hydra.sweep.dir={sweep}")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: heads=1,2,4 is invalid in this sweep: jobs 0, 1, 2 (heads=1 | heads=2 | heads=4) would train the "
        "same run, as nothing reads what differs; sweep it where it matters, in a sweep of its own"]
    assert not sweep.exists()
