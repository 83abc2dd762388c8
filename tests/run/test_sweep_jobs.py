"""A sweep's jobs are known before it starts: combinations that would train the same run are folded into one job
(refused with Hydra's basic sweeper), and two jobs that would write to the same dir are refused in one line before
anything is created."""

from __future__ import annotations

from pathlib import Path

import pytest
from hydra.core.override_parser.overrides_parser import OverridesParser

from attention_lab.errors import ConfigError
from attention_lab.records.commands import script_command
from attention_lab.run.overrides import hydra_compose_api
from attention_lab.run.sweep_jobs import fold_jobs, planned_jobs, sweep_job_configs
from conftest import CONFIG_DIR, QUIET, TRAIN, check_command_line, run_in_process


@pytest.mark.parametrize("arguments", [
    ["model=self,multihead", "heads=1,2,4"],
    ["heads=1,2", "+task.options.delay=1", "heads=3,4", "~logger", "seed=range(0,3)"],  # a key given again keeps its place
    ["mask=none,causal", "model=self"],
], ids=" ".join)
def test_the_planned_jobs_are_the_basic_sweepers(arguments):
    # Hydra's own expansion, read here only as the reference the lab's copy must match, job for job.
    from hydra._internal.core_plugins.basic_sweeper import BasicSweeper

    parsed = OverridesParser.create().parse_overrides(arguments)
    assert planned_jobs(arguments) == BasicSweeper.split_arguments(parsed, None)[0]


@pytest.mark.parametrize(("argv", "fragment"), [
    (["hydra/sweeper=basic", "model=self", "heads=1,2,4"],
     "heads=1,2,4 is invalid in this sweep: jobs 0, 1, 2 (heads=1 | heads=2 | heads=4)"),
    (["hydra/sweeper=basic", "model=self,multihead", "heads=1,2"],
     "heads=1,2 is invalid in this sweep: with model=self, jobs 0, 1"),
    # A sweep that folds is checked whole: one impossible job refuses it before anything runs.
    (["model=self,multihead", "heads=1,5"], "heads=5 is invalid for model=multihead"),
    (["hydra.sweep.subdir=same", "heads=1,2"], "hydra.sweep.subdir=same is invalid: jobs 0 and 1 would both write"),
    (["hydra.sweep.subdir=${heads}", "heads=1,2", "lr=0.1,0.2"], "jobs 0 and 1 would both write to <sweep dir>/1"),
    (["hparams_search=optuna", "hydra.sweep.subdir=trial"], "hydra.sweep.subdir=trial is invalid"),
    # Every job is checked before the first starts, not only those of a sweep that folds; the line names the job.
    (["heads=3,5"], "heads=5 is invalid for model=multihead: it must be a divisor of d_model=48: 1, 2, 3, 4, 6, 8, "
                    "12, 16, 24 or 48 (the heads split it equally) (in job 1 of 2: heads=5; no job of the sweep has "
                    "started)"),
    (["model=multihead,self", "heads=5", "lr=0.1,0.2"], "(in job 0 of 4: model=multihead lr=0.1;"),
    # A search: each choice, and each bound of a range, in a trial it could ask for (the preset's params too).
    (["hparams_search=optuna", "lr=interval(0,0.01)"],
     "lr=0.0 is invalid: the learning rate must be a finite number > 0 (in a trial the search may ask for "
     "(lr=0.0 heads=1 layers=1); no job of the sweep has started)"),
    (["hparams_search=optuna", "d_model=36", "heads=choice(4,8)"], "(in a trial the search may ask for (lr=0.0005 "
                                                                   "heads=8 layers=1);"),
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


def test_a_product_runs_each_distinct_run_once():
    with hydra_compose_api(CONFIG_DIR):
        configs = sweep_job_configs(["model=self,multihead", "heads=1,2"], "train", lambda cfg: None)
    assert [(cfg.model.name, cfg.model.num_heads) for cfg in configs] == [("self", 1), ("multihead", 1),
                                                                          ("multihead", 2)]
    product = planned_jobs(["model=self,multihead", "heads=1,2", "seed=0,1"])
    fingerprints = ["self seed0", "self seed1", "self seed0", "self seed1", "mh1 seed0", "mh1 seed1", "mh2 seed0",
                    "mh2 seed1"]
    plan = fold_jobs(product, fingerprints)
    assert plan.jobs == [product[n] for n in (0, 1, 4, 5, 6, 7)] and plan.kept == [0, 1, 4, 5, 6, 7]
    assert [fold.line() for fold in plan.folds] == [
        "folded: model=self heads=2 seed=0 into job 0 (model=self heads=1 seed=0): with model=self seed=0, nothing "
        "reads heads",
        "folded: model=self heads=2 seed=1 into job 1 (model=self heads=1 seed=1): with model=self seed=1, nothing "
        "reads heads"]
    assert plan.folds[0].as_json() == {"overrides": product[2], "into": 0, "into_overrides": product[0],
                                      "reason": "with model=self seed=0, nothing reads heads"}


def test_the_command_line_refuses_a_repeating_sweep_before_creating_anything(tmp_path: Path):
    sweep = tmp_path / "sweep"
    proc = run_in_process(TRAIN, "-m", "hydra/sweeper=basic", "model=self", "heads=1,2,4", f"hydra.sweep.dir={sweep}")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: heads=1,2,4 is invalid in this sweep: jobs 0, 1, 2 (heads=1 | heads=2 | heads=4) would train the "
        "same run, as nothing reads what differs; sweep it where it matters, in a sweep of its own"]
    assert not sweep.exists()


def test_a_sweep_with_an_impossible_job_trains_none_of_them(tmp_path: Path):
    """Job 1 cannot run: the sweep stops in one line before job 0 trains, and creates nothing."""
    sweep = tmp_path / "sweep"
    proc = run_in_process(TRAIN, "-m", "heads=3,5", "max_steps=4", *QUIET, f"hydra.sweep.dir={sweep}")
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "error: heads=5 is invalid for model=multihead: it must be a divisor of d_model=48: 1, 2, 3, 4, 6, 8, 12, 16, "
        "24 or 48 (the heads split it equally) (in job 1 of 2: heads=5; no job of the sweep has started)"]
    assert "Launching" not in proc.stdout and not sweep.exists()


def test_a_finished_sweep_ends_with_the_commands_that_compare_its_jobs(finished_sweep: Path):
    lines = (finished_sweep.parent / "console.txt").read_text().rstrip().splitlines()
    # The sweep ran in this process's working dir: its commands name the interpreter and scripts as seen from here.
    assert lines[-2:] == [f"{lines[-2].split(' next: ')[0]} next: {script_command('compare.py')} {finished_sweep}",
                          f"      {script_command('start_tensorboard.py')} {finished_sweep}"]
