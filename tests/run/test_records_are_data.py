"""A run or sweep dir handed to a resume is data: nothing in its records chooses code to run or makes the lab write
outside it, and a full disk leaves its records whole. Every payload here is real: a yaml whose hydra.callbacks
would touch a marker and empty an unrelated file, symlinks into other folders, a filesystem without room."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from test_errors import assert_one_line_error
from test_sweep_resume import fake_sweep, snapshot

from attention_lab.errors import ConfigError
from attention_lab.run.sweep_resume import record_kept
from attention_lab.run.sweep_summary import write_summary
from conftest import CONFIG_DIR, TRAIN, run_script, run_train_following_exec

EVIL = """# @package _global_
hydra:
  callbacks:
    touch:
      _target_: pathlib.Path.touch
      self: {marker}
    empty:
      _target_: builtins.open
      file: {victim}
      mode: w
"""


@pytest.fixture
def payload(tmp_path):
    """An evil yaml outside the project, a marker it would create and a file it would empty."""
    outside = tmp_path / "outside"
    outside.mkdir()
    marker, victim = outside / "code-ran", outside / "precious.txt"
    victim.write_text("keep me\n")
    (outside / "evil.yaml").write_text(EVIL.format(marker=marker, victim=victim))
    return outside


def choice(group: str, payload: Path, absolute: bool = False) -> str:
    """The group option that names the payload's yaml: relative to the group's folder, or absolute."""
    evil = payload / "evil"
    return str(evil) if absolute else os.path.relpath(evil, CONFIG_DIR / group)


def assert_untouched(payload: Path) -> None:
    assert not (payload / "code-ran").exists(), "the record's yaml ran code"
    assert (payload / "precious.txt").read_text() == "keep me\n"


TINY = ["max_steps=2", "task.train_size=64", "task.val_size=32", "callbacks.attention_maps.images=false"]

SWEEP_SPELLINGS = {  # where a record may try to choose a file: (job overrides, hydra overrides)
    "experiment": lambda p: ([f"experiment={choice('experiment', p)}"], []),
    "added_experiment": lambda p: ([f"+experiment={choice('experiment', p)}"], []),
    "swept_experiment": lambda p: ([f"experiment=induction_heads,{choice('experiment', p)}"], []),
    "absolute_model": lambda p: ([f"model={choice('model', p, absolute=True)}"], []),
    "logger_list": lambda p: ([f"logger=[tensorboard,{choice('logger', p)}]"], []),
    "launcher": lambda p: ([], [f"hydra/launcher={choice('hydra/launcher', p)}"]),
    "quoted_task": lambda p: ([f"task='{choice('task', p)}'"], []),
    "unknown_group_path": lambda p: ([f"+model/{choice('model', p)}=x"], []),
    "packaged": lambda p: (["model@hydra.callbacks=self"], []),
}


@pytest.mark.parametrize("spelling", sorted(SWEEP_SPELLINGS))
def test_a_sweep_record_chooses_only_shipped_configs(tmp_path, payload, spelling):
    task, hydra = SWEEP_SPELLINGS[spelling](payload)
    sweep_dir = fake_sweep(tmp_path, ["heads=1,2", *TINY, *task], hydra)
    if spelling == "experiment":  # as a user runs it, in a process of its own; the other spellings in-process
        proc = run_script(TRAIN, f"resume={sweep_dir}", timeout=120)
    else:
        proc = run_train_following_exec(f"resume={sweep_dir}")
    assert_one_line_error(proc, f"resume={sweep_dir}", "a record is data")
    assert_untouched(payload)
    assert sorted(p.name for p in sweep_dir.iterdir()) == ["multirun.yaml"]


def test_shipped_choices_still_resume(tmp_path):
    sweep_dir = fake_sweep(tmp_path, ["heads=1,2", *TINY, "~callbacks.head_score_maps", "ablation=[]",
                                      "logger=[tensorboard,csv]"], ["hydra/launcher=basic"])
    proc = run_train_following_exec(f"resume={sweep_dir}")  # the real exec: tests/run/test_sweep_folds.py and others
    assert proc.returncode == 0, proc.stderr[-3000:]
    jobs = json.loads((sweep_dir / "sweep_summary.json").read_text())["jobs"]
    assert [job["status"] for job in jobs] == ["ok", "ok"]


def interrupted_run_dir(tmp_path: Path, overrides: list[str]) -> Path:
    """An interrupted run's dir with only its .hydra record: enough for everything checked before training."""
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "overrides.yaml").write_text("".join(f"- {json.dumps(o)}\n" for o in overrides))
    return run_dir


@pytest.mark.parametrize("spelling", ["experiment", "model", "block"])
def test_a_run_record_chooses_only_shipped_configs(tmp_path, payload, spelling):
    run_dir = interrupted_run_dir(tmp_path, [*TINY, f"{spelling}={choice(spelling, payload)}"])
    before = snapshot(run_dir)
    proc = run_train_following_exec(f"resume={run_dir}")
    assert_one_line_error(proc, f"resume={run_dir}", "a record is data")
    assert_untouched(payload)
    assert snapshot(run_dir) == before


@pytest.mark.parametrize("setting", ["paths.output_dir={out}", "callbacks.model_checkpoint.dirpath={out}",
                                     "logger.tensorboard.save_dir={out}", "trainer.default_root_dir={out}"])
def test_a_record_cannot_move_where_the_run_writes(tmp_path, setting):
    out = tmp_path / "elsewhere"
    for sweep in (False, True):
        overrides = [*TINY, setting.format(out=out)]
        where = fake_sweep(tmp_path / f"sweep{sweep}", ["heads=1,2", *overrides], []) if sweep \
            else interrupted_run_dir(tmp_path / "single", overrides)
        proc = run_train_following_exec(f"resume={where}")
        assert_one_line_error(proc, f"resume={where}", "writes only into its own dir")
        assert not out.exists()


@pytest.mark.parametrize("link", ["job_dir_to_a_folder", "job_dir_to_another_sweep", "record_to_a_file",
                                  "checkpoints_of_a_run"])
def test_a_resume_never_follows_a_link_out_of_its_dir(tmp_path, link):
    elsewhere = tmp_path / "users_folder"
    elsewhere.mkdir()
    (elsewhere / "notes.txt").write_text("mine\n")
    if link == "checkpoints_of_a_run":
        target = interrupted_run_dir(tmp_path, TINY)
        (target / "checkpoints").symlink_to(elsewhere, target_is_directory=True)
    else:
        target = fake_sweep(tmp_path, ["heads=1,2", *TINY], [])
        other = fake_sweep(tmp_path / "other", ["heads=3,4", *TINY], [])
        if link == "record_to_a_file":
            (target / "0").mkdir()
            (target / "0" / "run_info.json").symlink_to(elsewhere / "notes.txt")
        else:
            (target / "1").symlink_to(elsewhere if link == "job_dir_to_a_folder" else other,
                                      target_is_directory=True)
    watched = {path: snapshot(path) for path in (elsewhere, tmp_path / "other") if path.exists()}
    proc = run_train_following_exec(f"resume={target}")
    assert_one_line_error(proc, f"resume={target}", "is a symlink", "does not follow it")
    assert {path: snapshot(path) for path in watched} == watched, "a resume wrote through a link"


def test_a_full_disk_stops_a_sweep_resume_in_one_line(small_filesystem):
    sweep_dir = small_filesystem / "sweep"
    sweep_dir.mkdir()
    record = {"hydra": {"overrides": {"task": ["heads=1,2", *TINY], "hydra": []}}}
    (sweep_dir / "multirun.yaml").write_text(json.dumps(record))
    filler = small_filesystem / "filler"
    with open(filler, "wb", buffering=0) as handle:  # fill the filesystem to the last block
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError:
            pass
    before = snapshot(sweep_dir)
    proc = run_train_following_exec(f"resume={sweep_dir}")
    assert_one_line_error(proc, f"resume={sweep_dir}", "KiB free", "free some space")
    assert snapshot(sweep_dir) == before, "a record changed, or a temp file was left"


def test_multirun_yaml_is_put_back_when_its_rewrite_is_cut(tmp_path):
    """Hydra's sweeper rewrites multirun.yaml in place: a rewrite cut short (a full disk) is undone."""
    sweep_dir = fake_sweep(tmp_path, ["heads=1,2"], [])
    original = (sweep_dir / "multirun.yaml").read_bytes()
    with pytest.raises(OSError), record_kept(sweep_dir, f"resume={sweep_dir}"):
        (sweep_dir / "multirun.yaml").write_bytes(original[:20])  # cut mid-value
        raise OSError(28, "No space left on device")
    assert (sweep_dir / "multirun.yaml").read_bytes() == original
    assert sorted(p.name for p in sweep_dir.iterdir()) == ["multirun.yaml"], "the copy was left behind"
    # A rewrite that completes is kept, and the copy goes.
    with record_kept(sweep_dir, f"resume={sweep_dir}"):
        (sweep_dir / "multirun.yaml").write_text(json.dumps({"hydra": {"overrides": {"task": ["heads=3"]}}}))
    assert "heads=3" in (sweep_dir / "multirun.yaml").read_text()
    assert sorted(p.name for p in sweep_dir.iterdir()) == ["multirun.yaml"]


def test_a_copy_that_does_not_fit_changes_nothing(small_filesystem):
    sweep_dir = small_filesystem / "sweep"
    sweep_dir.mkdir()
    (sweep_dir / "multirun.yaml").write_text(json.dumps({"hydra": {"overrides": {"task": ["x=" + "1" * 200_000]}}}))
    free = os.statvfs(small_filesystem)
    (small_filesystem / "filler").write_bytes(b"\0" * (free.f_bavail * free.f_frsize - 100_000))
    before = snapshot(sweep_dir)
    with pytest.raises(ConfigError, match="cannot be written"), record_kept(sweep_dir, f"resume={sweep_dir}"):
        raise AssertionError("the resume went on without a copy of its record")
    assert snapshot(sweep_dir) == before


def copy_of(sweep_dir: Path, tmp_path: Path) -> Path:
    """A copy to change of a sweep shared read-only (conftest's ``finished_sweep``)."""
    copy = tmp_path / "sweep"
    shutil.copytree(sweep_dir, copy, symlinks=True)
    return copy


# One row per way a field is read: a typed field of the wrong type, and a status that is none of the statuses (each
# field's own rule: tests/records/test_run_info.py). A malformed record takes one path through the resume, whatever the field.
@pytest.mark.parametrize("field, value", [("job", "three"), ("status", 3)])
def test_a_malformed_run_info_is_one_line_and_the_other_jobs_go_on(finished_sweep, tmp_path, field, value):
    sweep_dir = copy_of(finished_sweep, tmp_path)
    info_path = sweep_dir / "1" / "run_info.json"
    info = json.loads(info_path.read_text())
    info.update({field: value, "status": "failed" if field != "status" else value})
    info_path.write_text(json.dumps(info))
    rows = {row["output_dir"]: row for row in write_summary(sweep_dir)["jobs"]}
    assert rows[str(sweep_dir / "0")]["status"] == "ok"
    assert rows[str(sweep_dir / "1")]["status"] == "failed" and "is malformed" in rows[str(sweep_dir / "1")]["error"]

    kept = snapshot(sweep_dir / "0")
    proc = run_train_following_exec(f"resume={sweep_dir}")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert errors[0].startswith("error: job 1 (") and f"{info_path} is malformed: {field} is" in errors[0]
    assert errors[-1].startswith("error: 1 job still failed or interrupted after resuming the sweep")
    assert snapshot(sweep_dir / "0") == kept
    assert info_path.read_text() == json.dumps(info), "the malformed record was changed"


def test_deeply_nested_records_are_malformed_in_one_line_and_write_no_traceback(finished_sweep, tmp_path):
    """Job 0 is ok, but its metrics.json nests 20,000 levels: it is kept. Job 1's run_info.json nests as deep: it is
    malformed, said in one line; neither job dir gets a traceback."""
    sweep_dir = copy_of(finished_sweep, tmp_path)
    deep = "[" * 20_000 + "]" * 20_000
    (sweep_dir / "0" / "metrics.json").write_text(f'{{"val/seq_acc": {deep}}}')
    info_path = sweep_dir / "1" / "run_info.json"
    info_path.write_text(f'{{"status": "failed", "error": {deep}}}')
    kept = snapshot(sweep_dir / "0")
    proc = run_train_following_exec(f"resume={sweep_dir}")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert errors[0].startswith("error: job 1 (") and f"{info_path} is malformed: nested deeper than 100 levels" in \
        errors[0], errors
    assert errors[-1].startswith("error: 1 job still failed or interrupted after resuming the sweep"), errors
    assert not list(sweep_dir.rglob("traceback.txt"))
    assert snapshot(sweep_dir / "0") == kept


def test_a_sweep_whose_jobs_are_all_refused_says_so(finished_sweep, tmp_path):
    """multirun.yaml changed by hand: every job's dir now holds another job's run, and nothing trains."""
    sweep_dir = copy_of(finished_sweep, tmp_path)
    record = (sweep_dir / "multirun.yaml").read_text()
    (sweep_dir / "multirun.yaml").write_text(record.replace("heads=1,2", "heads=3,4"))
    jobs_before = {n: snapshot(sweep_dir / n) for n in ("0", "1")}
    proc = run_train_following_exec(f"resume={sweep_dir}")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert [e.split(" (")[0] for e in errors[:2]] == ["error: job 0", "error: job 1"]
    assert all("holds another job's run" in e for e in errors[:2])
    assert errors[-1].startswith("error: 2 jobs still failed or interrupted after resuming the sweep (2 failed")
    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert summary["counts"] == {"failed": 2} and [job["overrides"][0] for job in summary["jobs"]] == ["heads=3", "heads=4"]
    assert {n: {k: v for k, v in snapshot(sweep_dir / n).items() if k != "train.log"} for n in ("0", "1")} == \
        {n: {k: v for k, v in jobs_before[n].items() if k != "train.log"} for n in ("0", "1")}


# --- an Optuna sweep's study is its own --------------------------------------------------------------------------

def optuna_sweep(tmp_path: Path, sweep_id: str | None = "this-sweep") -> Path:
    """An Optuna sweep dir that ran one trial: its record, a job dir, and its id (no study yet)."""
    sweep_dir = fake_sweep(tmp_path, ["hparams_search=optuna", *TINY], [])
    (sweep_dir / "0").mkdir()
    (sweep_dir / "0" / "run_info.json").write_text(json.dumps({"job": 0, "status": "ok", "overrides": []}))
    if sweep_id:
        (sweep_dir / ".sweep_id").write_text(sweep_id + "\n")
    return sweep_dir


def stamped_study(sweep_dir: Path, stamp: str | None) -> None:
    import optuna

    study = optuna.create_study(storage=f"sqlite:///{sweep_dir}/optuna.db", study_name="attention_lab",
                                direction="maximize")
    if stamp:
        study.set_user_attr("attention_lab.sweep_id", stamp)


@pytest.mark.parametrize("case, fragment", [
    ("missing", "optuna.db is missing, though 1 trials ran"),
    ("corrupt", "optuna.db is not a readable Optuna study"),
    ("another_sweeps", "holds the study of another sweep"),
    ("another_name", "optuna.db is not a readable Optuna study with study_name=attention_lab"),
])
def test_a_resume_continues_only_its_own_study(tmp_path, case, fragment):
    sweep_dir = optuna_sweep(tmp_path)
    if case == "corrupt":
        (sweep_dir / "optuna.db").write_bytes(b"SQLite format 3\0" + b"\xff" * 4000)
    elif case == "another_sweeps":
        stamped_study(sweep_dir, "another-sweep")
    elif case == "another_name":
        import optuna

        optuna.create_study(storage=f"sqlite:///{sweep_dir}/optuna.db", study_name="not_ours")
    before = snapshot(sweep_dir)
    proc = run_train_following_exec(f"resume={sweep_dir}")
    assert_one_line_error(proc, f"resume={sweep_dir}", fragment)
    assert snapshot(sweep_dir) == before


def own_study(sweep_dir: Path) -> Any:
    """The sweep's own study (stamped with its id), to add crafted trials or SQL to."""
    import optuna

    stamped_study(sweep_dir, "this-sweep")
    return optuna.load_study(study_name="attention_lab", storage=f"sqlite:///{sweep_dir}/optuna.db")


def trial_of_another_search(sweep_dir: Path) -> None:
    """A complete trial that sampled lr from a list of words: this search samples it from interval(0.0005, 0.01)."""
    from optuna.distributions import CategoricalDistribution
    from optuna.trial import create_trial

    own_study(sweep_dir).add_trial(create_trial(params={"lr": "large"}, value=0.5,
                                                distributions={"lr": CategoricalDistribution(["large", "small"])}))


def sql_of_its_own(sweep_dir: Path) -> None:
    """A trigger that runs on each trial the sweeper writes (here: it would fill a table of its own)."""
    own_study(sweep_dir)
    with contextlib.closing(sqlite3.connect(sweep_dir / "optuna.db")) as db, db:
        db.executescript("CREATE TABLE ran (x); CREATE TRIGGER on_trial AFTER INSERT ON trials "
                         "BEGIN INSERT INTO ran VALUES (1); END;")


def without_trials(sweep_dir: Path) -> None:
    shutil.rmtree(sweep_dir / "0")  # nothing ran yet: a study that is missing would be created


CRAFTED_STUDIES = {  # a study (or what stands in its place) handed over in a sweep dir, and what refuses it
    "not_a_database": (lambda d: (d / "optuna.db").write_text("notes, not a database\n" * 200),
                       "optuna.db is not a readable Optuna study"),
    "a_folder": (lambda d: (d / "optuna.db").mkdir(), "optuna.db is not a file"),
    "a_folder_before_any_trial": (lambda d: (without_trials(d), (d / "optuna.db").mkdir()), "optuna.db is not a file"),
    "a_fifo_before_any_trial": (lambda d: (without_trials(d), os.mkfifo(d / "optuna.db")), "optuna.db is not a file"),
    "trials_of_another_search": (trial_of_another_search, "a study of another search"),
    "an_enqueued_trial": (lambda d: own_study(d).enqueue_trial({"heads": 3, "lr": "0.01; touch x", "layers": 1}),
                          "holds trial 0 waiting to run"),
    "sql_of_its_own": (sql_of_its_own, "holds SQL code of its own (the trigger on_trial)"),
    "an_undecodable_sweep_id": (lambda d: (own_study(d), (d / ".sweep_id").write_bytes(b"\xff\xfethis-sweep\n")),
                                "its .sweep_id is not a sweep's id"),
    "a_long_sweep_id": (lambda d: (own_study(d), (d / ".sweep_id").write_text("this-sweep" * 10_000)),
                        "its .sweep_id is not a sweep's id"),
}


@pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning")
@pytest.mark.parametrize("case", sorted(CRAFTED_STUDIES))
def test_a_crafted_study_is_refused_in_one_line(tmp_path, case):
    """What a handed-over sweep dir holds in its study's place is read as data: one line before anything runs, nothing
    written in the dir or beside it, no SQL of its own run (before: tracebacks from SQLite, Optuna or the decoder,
    a line of 100,000 characters, and a trigger run on each trial)."""
    craft, fragment = CRAFTED_STUDIES[case]
    sweep_dir = optuna_sweep(tmp_path)
    craft(sweep_dir)
    before = snapshot(tmp_path)
    proc = run_train_following_exec(f"resume={sweep_dir}")
    line = assert_one_line_error(proc, fragment)
    assert line.startswith(f"error: resume={sweep_dir} is invalid: "), line
    assert snapshot(tmp_path) == before, "the refused resume wrote something"


@pytest.mark.parametrize("name, optuna", [("evil.db?", True), ("x${oc.env:HOME}", False), ("a,b", False)])
def test_a_sweep_dir_is_relaunched_only_by_its_own_path(tmp_path, name, optuna):
    """The relaunched command line names the sweep dir, and the study's storage URL is built from it: a name that
    Hydra's grammar or SQLAlchemy's URL reads otherwise (a query at '?', an interpolation, a sweep at ',') would send
    the study, the jobs and their records elsewhere. Before: the study of ``<dir>/evil.db?`` opened (and created)
    ``<dir>/evil.db``, beside the sweep dir."""
    handed = tmp_path / "handed"
    handed.mkdir()
    sweep_dir = optuna_sweep(handed) if optuna else fake_sweep(handed, ["heads=1,2", *TINY], [])
    if optuna:
        own_study(sweep_dir)
    sweep_dir = sweep_dir.rename(handed / name)
    before = snapshot(tmp_path)
    proc = run_train_following_exec(f"resume={sweep_dir}")
    line = assert_one_line_error(proc, "is invalid: ")
    assert line.startswith(f"error: resume={sweep_dir} is invalid: "), line
    assert snapshot(tmp_path) == before and sorted(p.name for p in handed.iterdir()) == [name]


def test_a_sweep_records_sweeper_section_is_not_replayed(tmp_path):
    """multirun.yaml's own ``hydra.sweeper`` section (a storage outside, a study name with path characters, a
    target) is Hydra's record of the sweep, not read by a resume: the sweep continues its own study in its dir."""
    import optuna

    outside = tmp_path / "outside"
    outside.mkdir()
    sweep_dir = optuna_sweep(tmp_path)
    own_study(sweep_dir)
    record = json.loads((sweep_dir / "multirun.yaml").read_text())
    record["hydra"]["sweeper"] = {"_target_": "pathlib.Path.touch", "self": str(outside / "marker"),
                                  "storage": f"sqlite:///{outside}/study.db", "study_name": "../../outside/study"}
    (sweep_dir / "multirun.yaml").write_text(json.dumps(record))
    proc = run_train_following_exec(f"resume={sweep_dir}", "hydra.sweeper.n_trials=2")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert sorted(outside.iterdir()) == []
    study = optuna.load_study(study_name="attention_lab", storage=f"sqlite:///{sweep_dir}/optuna.db")
    assert [t.state for t in study.trials] == [optuna.trial.TrialState.COMPLETE]


def test_a_search_whose_every_trial_failed_ends_in_one_line(tmp_path):
    import optuna

    sweep_dir = tmp_path / "sweep"
    proc = run_train_following_exec("-m", "hparams_search=optuna", "hydra.sweeper.n_trials=2", *TINY,
                                    f"task.corpus={tmp_path / 'missing.txt'}", f"hydra.sweep.dir={sweep_dir}")
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in output and "Record does not exist" not in output, output
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert errors[-1].startswith("error: every trial of the search failed (2 failed"), errors
    summary = json.loads((sweep_dir / "sweep_summary.json").read_text())
    assert summary["counts"] == {"failed": 2}
    # The new sweep stamped its study with its own id.
    study = optuna.load_study(study_name="attention_lab", storage=f"sqlite:///{sweep_dir}/optuna.db")
    assert study.user_attrs["attention_lab.sweep_id"] == (sweep_dir / ".sweep_id").read_text().strip()


def test_a_finished_search_has_nothing_to_resume(tmp_path):
    sweep_dir = optuna_sweep(tmp_path)
    stamped_study(sweep_dir, "this-sweep")
    for n in range(1, 10):  # the preset's n_trials=10, all complete
        (sweep_dir / str(n)).mkdir()
        (sweep_dir / str(n) / "run_info.json").write_text(json.dumps({"job": n, "status": "ok", "overrides": []}))
    proc = run_train_following_exec(f"resume={sweep_dir}")
    assert_one_line_error(proc, "already has 10 complete trials", "larger hydra.sweeper.n_trials")
