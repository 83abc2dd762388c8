"""resume=<sweep dir> finishes a sweep in its own dir: ok jobs are kept byte for byte, interrupted ones continue
from their checkpoints, failed and never-started ones train again in their own dirs; the summary and the exit
status say what is left. An Optuna sweep continues its study up to n_trials complete trials in total."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest
from test_errors import assert_one_line_error

from conftest import (
    CONFIG_DIR,
    OBSERVERS_OFF,
    QUIET,
    ROOT,
    TINY_JOB,
    TRAIN,
    run_in_process,
    run_train,
    run_train_following_exec,
    signal_when,
    start_train,
)

SMALL = ["max_steps=60", "task.train_size=256", "task.val_size=32", "trainer.val_check_interval=10",
         "~callbacks.early_stopping", "ablation=[]", *OBSERVERS_OFF]


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under folder: its bytes and modification time."""
    return {str(p.relative_to(folder)): (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.rglob("*") if p.is_file()}


def summary(sweep_dir: Path) -> dict[int, dict]:
    return {row["job"]: row for row in json.loads((sweep_dir / "sweep_summary.json").read_text())["jobs"]}


def error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    return [line for line in proc.stderr.splitlines() if line.startswith("error: ")]


def refused_resume(monkeypatch, sweep_dir: Path, *added: str) -> subprocess.CompletedProcess:
    """``resume=<sweep dir>`` that must be refused before the command relaunches itself as the sweep's command
    line (an exec, which only a process of its own survives): run in this process, where a relaunch fails the test
    instead of replacing it."""
    def relaunch(path: str, args: list[str]) -> None:
        raise AssertionError(f"resume={sweep_dir} was relaunched as {args[2:]} instead of refused")

    monkeypatch.setattr(os, "execv", relaunch)
    return run_in_process(TRAIN, f"resume={sweep_dir}", *added)


def interrupted_sweep(sweep_dir: Path, *overrides: str) -> subprocess.CompletedProcess:
    """A basic sweep stopped by SIGTERM once job 2 has its first checkpoint."""
    proc = start_train("-m", *overrides, *SMALL, f"hydra.sweep.dir={sweep_dir}")
    stdout, stderr = signal_when(proc, lambda: (sweep_dir / "2" / "checkpoints" / "last.ckpt").exists(),
                                 "job 2's first checkpoint", signal.SIGTERM)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)


def test_resume_finishes_failed_interrupted_and_never_started_jobs(tmp_path):
    sweep_dir, corpus = tmp_path / "sweep", tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(ROOT / "src" / "attention_lab" / "data" / "corpus.txt", corpus / "good.txt")
    # job 0: ok; job 1: its corpus file is missing (fails in the job); job 2: interrupted; job 3: never started
    corpora = f"task.corpus={corpus / 'good.txt'},{corpus / 'late.txt'}"  # outside the sweep dir: named on each resume
    first = interrupted_sweep(sweep_dir, "seed=0,1", corpora)
    assert first.returncode == 128 + signal.SIGTERM, first.stderr[-3000:]
    assert f"resume={sweep_dir} (the whole sweep)" in first.stderr
    jobs = summary(sweep_dir)
    assert {n: row["status"] for n, row in jobs.items()} == {0: "ok", 1: "failed", 2: "interrupted"}
    assert not (sweep_dir / "3").exists()
    ok_job = snapshot(sweep_dir / "0")

    # The corpus is still missing: job 2 is finished, jobs 1 and 3 fail, and the exit status says so.
    again = run_train_following_exec(f"resume={sweep_dir}", corpora)
    assert again.returncode == 1 and "Traceback" not in again.stderr, again.stderr[-3000:]
    assert error_lines(again)[-1].startswith("error: 2 jobs still failed or interrupted after resuming the sweep")
    jobs = summary(sweep_dir)
    assert {n: row["status"] for n, row in jobs.items()} == {0: "ok", 1: "failed", 2: "ok", 3: "failed"}
    assert f"resuming {sweep_dir / '2'} from" in (sweep_dir / "2" / "train.log").read_text()
    assert json.loads((sweep_dir / "2" / "run_info.json").read_text())["attempts"] == 2

    shutil.copy(corpus / "good.txt", corpus / "late.txt")
    done = run_train_following_exec(f"resume={sweep_dir}", corpora)
    assert done.returncode == 0 and not error_lines(done), done.stderr[-3000:]
    jobs = summary(sweep_dir)
    assert {n: row["status"] for n, row in jobs.items()} == {0: "ok", 1: "ok", 2: "ok", 3: "ok"}
    assert all(row["metrics"]["global_step"] == 60 for row in jobs.values())
    assert snapshot(sweep_dir / "0") == ok_job, "an ok job's files changed"
    # Job 1 started over in its own dir; its failed attempts' records were set aside, not lost.
    info = json.loads((sweep_dir / "1" / "run_info.json").read_text())
    assert info["status"] == "ok" and info["attempts"] == 3 and info["job"] == 1
    assert json.loads((sweep_dir / "1" / "attempt1" / "run_info.json.previous").read_text())["status"] == "failed"
    assert list((sweep_dir / "1" / ".hydra" / "overrides.yaml").read_text().splitlines())[:2] == [
        "- seed=0", f"- task.corpus={corpus / 'late.txt'}"]
    assert "resume: null" in (sweep_dir / "1" / ".hydra" / "config.yaml").read_text().splitlines()  # trained anew


def fake_sweep(tmp_path: Path, task: list[str], hydra: list[str]) -> Path:
    """A sweep dir with only Hydra's record of its command line: enough for everything checked up front."""
    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir(parents=True)
    record = {"hydra": {"overrides": {"task": task, "hydra": hydra}}}
    (sweep_dir / "multirun.yaml").write_text(json.dumps(record))
    return sweep_dir


def test_resume_of_a_sweep_adds_only_training_length(tmp_path, monkeypatch):
    sweep_dir = fake_sweep(tmp_path, ["heads=1,2", "max_steps=5"], ["hydra.sweep.dir=x", "hydra.mode=MULTIRUN"])
    proc = refused_resume(monkeypatch, sweep_dir, "heads=4")
    assert_one_line_error(proc, "heads=4", f"resume={sweep_dir}", "max_steps")
    assert sorted(p.name for p in sweep_dir.iterdir()) == ["multirun.yaml"]


def test_a_parallel_sweep_resumed_with_another_launcher_drops_the_parallel_launchers_settings(tmp_path):
    """The recorded ``hydra.launcher.n_jobs`` belongs to the parallel launcher: replayed onto the basic one it was
    refused as a setting that does not exist."""
    from attention_lab.run.sweep_resume import command_line

    sweep_dir = fake_sweep(tmp_path, ["heads=1,2", "max_steps=5"],
                           ["hydra.sweep.dir=x", "hydra.mode=MULTIRUN", "hydra/launcher=parallel", "hydra.launcher.n_jobs=2"])
    argv = command_line([f"resume={sweep_dir}", "hydra/launcher=basic"], CONFIG_DIR)
    assert "hydra/launcher=basic" in argv and "hydra/launcher=parallel" not in argv, argv
    assert not [arg for arg in argv if arg.startswith("hydra.launcher.")], argv
    # The same launcher again keeps its recorded settings.
    argv = command_line([f"resume={sweep_dir}", "hydra/launcher=parallel"], CONFIG_DIR)
    assert "hydra.launcher.n_jobs=2" in argv, argv


def test_a_tampered_sweep_record_runs_nothing(tmp_path, monkeypatch):
    marker = tmp_path / "marker"
    sweep_dir = fake_sweep(tmp_path, ["heads=1,2", "+callbacks.z._target_=os.system",
                                      f"+callbacks.z.command='touch {marker}'"], [])
    proc = refused_resume(monkeypatch, sweep_dir)
    assert_one_line_error(proc, f"resume={sweep_dir}", "os.system")
    sweep_dir = fake_sweep(tmp_path / "b", ["heads=1,2"], ["hydra.callbacks.z._target_=os.system"])
    proc = refused_resume(monkeypatch, sweep_dir)
    assert_one_line_error(proc, f"resume={sweep_dir}", "hydra.callbacks.z._target_=os.system")
    assert not marker.exists() and sorted(p.name for p in sweep_dir.iterdir()) == ["multirun.yaml"]


def test_optuna_resume_continues_the_study_up_to_n_trials_in_total(tmp_path):
    import optuna

    sweep_dir = tmp_path / "optuna"
    run_train(sweep_dir, "hparams_search=optuna", "hydra.sweeper.n_trials=2", *TINY_JOB, multirun=True)
    kept = {n: snapshot(sweep_dir / str(n)) for n in (0, 1)}
    resumed = run_train_following_exec(f"resume={sweep_dir}", "hydra.sweeper.n_trials=3")
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    study = optuna.load_study(study_name="attention_lab", storage=f"sqlite:///{sweep_dir}/optuna.db")
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE] * 3
    jobs = summary(sweep_dir)
    assert sorted(jobs) == [0, 1, 2] and all(row["status"] == "ok" for row in jobs.values())
    assert len({row["output_dir"] for row in jobs.values()}) == 3
    assert {n: snapshot(sweep_dir / str(n)) for n in (0, 1)} == kept, "a finished trial's files changed"
    # The new trial is a new point (a seeded sampler would otherwise propose trial 0 again), run in job dir 2.
    assert study.trials[2].params != study.trials[0].params
    assert {f"{k}={v}" for k, v in study.trials[2].params.items()} <= set(jobs[2]["overrides"])


def test_a_resumed_optuna_sweep_is_checked_before_its_jobs():
    """The job dirs of a resumed Optuna sweep follow the existing ones through an interpolation of hydra.job.num
    (attention_lab.run.sweep_resume.optuna_overrides), which has no value before a job starts. The sweep's checks
    read that override as typed and refuse a bad setting in one line. Raising instead would not stop the sweep:
    Hydra turns an exception in a callback into a warning (pyproject's filterwarnings makes that warning an error
    in the tests) and goes on."""
    from hydra import compose

    from attention_lab.run.overrides import hydra_compose_api
    from attention_lab.run.preflight import PreflightChecks

    overrides = ["hparams_search=optuna", "hydra.sweep.subdir='${lab.job_subdir:${hydra.job.num},2}'", "heads=5"]
    with hydra_compose_api(CONFIG_DIR):
        cfg = compose("train", overrides=overrides, return_hydra_config=True)
        with pytest.raises(SystemExit) as refused:
            PreflightChecks().on_multirun_start(config=cfg)
    assert str(refused.value.code).startswith("error: heads=5 is invalid for model=multihead"), refused.value.code


def test_a_job_dir_that_holds_another_jobs_run_is_left_alone(tmp_path):
    tiny = [*TINY_JOB, *QUIET]
    sweep_dir = fake_sweep(tmp_path, ["heads=1,2", *tiny], [])
    other = sweep_dir / "0"
    (other / ".hydra").mkdir(parents=True)
    (other / ".hydra" / "overrides.yaml").write_text("- heads=4\n- lr=0.01\n")
    (other / "run_info.json").write_text(json.dumps({"status": "failed", "job": 0, "overrides": ["heads=4"]}))
    before = snapshot(other)
    proc = run_train_following_exec(f"resume={sweep_dir}")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    lines = error_lines(proc)
    assert lines[0].startswith("error: job 0 (heads=1 ") and "holds another job's run (heads=4 lr=0.01)" in lines[0]
    assert {name: data for name, data in snapshot(other).items() if name != "train.log"} == before
    assert json.loads((sweep_dir / "1" / "run_info.json").read_text())["status"] == "ok"
