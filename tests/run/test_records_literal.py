"""A record's values are literals, and a run writes and reads only its own dir. A value that a run or sweep dir
replays is never resolved (no ``${...}``: no node created, nothing decoded, selected or read from the environment),
every folder and file the built loggers and checkpoint callbacks will write lies in the run dir, and a record's
corpus is its own. Every payload is real: each one touches a marker in a temp dir when it gets through."""

from __future__ import annotations

import builtins
import json
import os
import pickle
import time
from pathlib import Path

import pytest
from test_errors import assert_one_line_error
from test_records_are_data import TINY, interrupted_run_dir
from test_sweep_resume import fake_sweep, snapshot

from attention_lab.data.corpus import DEFAULT_CORPUS
from attention_lab.errors import ConfigError
from attention_lab.run.sweep_resume import command_line
from conftest import (
    CONFIG_DIR,
    QUIET,
    TRAIN,
    check_command_line,
    compose_config,
    run_in_process,
    run_train_following_exec,
)

LITERAL = "replays only literal values"
CONTAINED = "writes only into its own dir"


class TouchesMarker:
    """Unpickled, it creates the file ``marker``: what ``torch.load(..., weights_only=False)`` of a run dir's file runs."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return builtins.open, (self.marker, "w")


@pytest.fixture
def outside(tmp_path) -> Path:
    """A folder beside the record, where no payload may leave a trace; its ``marker`` must never appear."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_text(DEFAULT_CORPUS.read_text())  # a corpus, as a user's own files hold
    return folder


INTERPOLATIONS = {  # the real payloads: each passed the replay checks as a plain string before values were literal
    "torch_load": "callbacks.early_stopping='${{oc.create:{{_target_:torch.load,f:${{resume}}/notes.pt,weights_only:false}}}}'",
    "torch_load_double_quoted": 'callbacks.early_stopping="${{oc.create:{{_target_:torch.load,f:${{resume}}/notes.pt,'
                                'weights_only:false}}}}"',  # the spelling that reached a sweep job
    "os_mkdir": "callbacks.early_stopping='${{oc.create:{{_target_:os.mkdir,path:{marker}}}}}'",
    "allowed_class_writing_outside": "logger.tensorboard='${{oc.create:{{_target_:lightning.pytorch.loggers."
                                     "TensorBoardLogger,save_dir:{marker}}}}}'",
    "environment": "probe='${{oc.env:HOME}}'",
    "decode": "callbacks.early_stopping='${{oc.decode:\"{{_target_: os.mkdir, path: {marker}}}\"}}'",
    "select": "lr=${{oc.select:max_steps}}",
    "in_a_dict": "callbacks.early_stopping={{monitor:'${{oc.env:HOME}}'}}",
    "in_a_sweep": "lr=0.01,'${{oc.env:HOME}}'",
    "in_a_swept_list": "tags=choice([a],['${{oc.env:HOME}}'])",
}


def payload(name: str, record_dir: Path, marker: Path) -> str:
    (record_dir / "notes.pt").write_bytes(pickle.dumps(TouchesMarker(marker)))
    return INTERPOLATIONS[name].format(marker=marker)


@pytest.mark.parametrize("name", sorted(set(INTERPOLATIONS) - {"in_a_sweep", "in_a_swept_list"}))
def test_a_run_record_replays_no_interpolation(tmp_path, outside, name):
    run_dir = interrupted_run_dir(tmp_path, TINY)
    overrides = [*TINY, payload(name, run_dir, outside / "marker")]
    (run_dir / ".hydra" / "overrides.yaml").write_text("".join(f"- {json.dumps(o)}\n" for o in overrides))
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match=LITERAL):
        check_command_line([f"resume={run_dir}"])
    assert not (outside / "marker").exists()
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("name", sorted(INTERPOLATIONS))
def test_a_sweep_record_replays_no_interpolation(tmp_path, outside, name):
    """multirun.yaml's overrides, double-quoted (JSON), as ``cli.relaunch_resumed_sweep`` reads them before it
    launches the sweep again."""
    sweep_dir = fake_sweep(tmp_path, ["heads=1,2", *TINY], [])
    record = json.loads((sweep_dir / "multirun.yaml").read_text())
    record["hydra"]["overrides"]["task"].append(payload(name, sweep_dir, outside / "marker"))
    (sweep_dir / "multirun.yaml").write_text(json.dumps(record))
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match=LITERAL):
        command_line([f"resume={sweep_dir}"], CONFIG_DIR)
    assert not (outside / "marker").exists()
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("sweep", [False, True], ids=["run_dir", "sweep_dir"])
def test_a_pickle_in_the_dir_never_runs(tmp_path, outside, sweep):
    """The whole resume, as a user runs it: one error line, and the dir's pickle is never loaded."""
    overrides = [*TINY, *QUIET]
    where = fake_sweep(tmp_path, ["heads=1,2", *overrides], []) if sweep else interrupted_run_dir(tmp_path, overrides)
    line = payload("torch_load_double_quoted" if sweep else "torch_load", where, outside / "marker")
    if sweep:
        record = json.loads((where / "multirun.yaml").read_text())
        record["hydra"]["overrides"]["task"].append(line)
        (where / "multirun.yaml").write_text(json.dumps(record))
    else:
        (where / ".hydra" / "overrides.yaml").write_text("".join(f"- {json.dumps(o)}\n" for o in [*overrides, line]))
    before = snapshot(tmp_path)
    proc = run_train_following_exec(f"resume={where}")
    assert_one_line_error(proc, f"resume={where}", LITERAL)
    assert not (outside / "marker").exists(), "the run dir's pickle was loaded"
    assert snapshot(tmp_path) == before


# --- every path a built logger or checkpoint callback writes stays in the dir -------------------------------------

ESCAPES = {  # (the setting, overrides): where a class writes, moved from <tmp>/run to <tmp>/outside/marker by an
    # argument that is not a folder's path (a run's TensorBoard folder: <run>/tensorboard/<run name>)
    "tensorboard_name": ("logger.tensorboard", "logger.tensorboard.name=../outside/marker"),
    "tensorboard_version": ("logger.tensorboard", "+logger.tensorboard.version=../../outside/marker"),
    "tensorboard_sub_dir": ("logger.tensorboard", "+logger.tensorboard.sub_dir=../../../outside/marker"),
    "csv_name": ("logger.csv", "logger=[tensorboard,csv]", "logger.csv.name=../outside/marker"),
    "positional_save_dir": ("logger.extra", "+logger.extra={{_target_:lightning.pytorch.loggers.CSVLogger,"
                            "_args_:['{outside}/marker']}}"),
    "checkpoint_filename": ("callbacks.model_checkpoint", "callbacks.model_checkpoint.filename=../../outside/marker"),
}


def escape(name: str, outside: Path) -> tuple[str, list[str]]:
    setting, *overrides = ESCAPES[name]
    return setting, [o.format(outside=outside) for o in overrides]


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_a_record_moves_no_write_location(tmp_path, outside, name):
    _, overrides = escape(name, outside)
    run_dir = interrupted_run_dir(tmp_path, [*TINY, *overrides])
    before = snapshot(tmp_path)
    with pytest.raises(ConfigError, match=CONTAINED):
        check_command_line([f"resume={run_dir}"])
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_every_run_writes_only_into_its_own_dir(tmp_path, outside, name):
    """Checked on the built loggers and callbacks, before training: a fresh run's own settings too."""
    from attention_lab.callbacks.signals import StopSignals
    from attention_lab.train import RunContext, train

    setting, overrides = escape(name, outside)
    run_dir = tmp_path / "run"
    cfg = compose_config([f"paths.output_dir={run_dir}", "trainer.val_check_interval=1", *TINY, *overrides])
    with StopSignals() as stop, pytest.raises(ConfigError, match=f"{setting} is invalid: .*{CONTAINED}"):
        train(cfg, RunContext(stop=stop, accelerator="cpu", name="escape", run_dir=run_dir))
    assert sorted(outside.iterdir()) == [outside / "secret.txt"], "a run wrote outside its dir"


def test_a_fresh_run_that_would_write_outside_ends_in_one_line(tmp_path, outside):
    run_dir = tmp_path / "run"
    proc = run_in_process(TRAIN, *TINY, *QUIET, "logger.tensorboard.name=../outside/marker",
                          f"hydra.run.dir={run_dir}")
    assert_one_line_error(proc, "logger.tensorboard is invalid", str(outside / "marker"), CONTAINED)
    assert sorted(outside.iterdir()) == [outside / "secret.txt"]


# --- a record reads only its own data ------------------------------------------------------------------------------

def test_a_record_reads_no_corpus_outside_its_dir(tmp_path, outside):
    secret = outside / "secret.txt"
    run_dir = interrupted_run_dir(tmp_path, [*TINY, f"task.corpus={secret}"])
    sweep_dir = fake_sweep(tmp_path, ["heads=1,2", *TINY, f"task.corpus={secret}"], [])
    with pytest.raises(ConfigError, match=f"task.corpus={secret}, a file outside it"):
        check_command_line([f"resume={run_dir}"])
    with pytest.raises(ConfigError, match=f"task.corpus={secret}, a file outside it"):
        command_line([f"resume={sweep_dir}"], CONFIG_DIR)
    link = run_dir / "corpus.txt"  # a link in the dir to a file outside it is outside too
    link.symlink_to(secret)
    (run_dir / ".hydra" / "overrides.yaml").write_text(f"- task.corpus={link}\n")
    with pytest.raises(ConfigError, match="outside it"):
        check_command_line([f"resume={run_dir}"])


def test_a_record_reads_its_own_corpus_or_the_one_its_user_names(tmp_path, outside):
    own = tmp_path / "run" / "corpus.txt"
    run_dir = interrupted_run_dir(tmp_path, [*TINY, f"task.corpus={own}"])
    own.write_text(DEFAULT_CORPUS.read_text())
    check_command_line([f"resume={run_dir}"])
    secret = outside / "secret.txt"
    (run_dir / ".hydra" / "overrides.yaml").write_text("".join(f"- {o}\n" for o in [*TINY, f"task.corpus={secret}"]))
    check_command_line([f"resume={run_dir}", f"task.corpus={secret}"])  # named on the command line: the user's
    sweep_dir = fake_sweep(tmp_path, ["heads=1,2", *TINY, f"task.corpus={secret}"], [])
    assert f"task.corpus={secret}" in command_line([f"resume={sweep_dir}", f"task.corpus={secret}"], CONFIG_DIR)


# --- experiment=mqar and mixers=[...] records, replayed with hostile values -----------------------------------------

VARIANTS = "a record is data and names only attention variants there"
MQAR = ["experiment=mqar", "layers=2"]
HOSTILE = {  # what a record adds to TINY ({outside}: the folder beside it, {evil}: a yaml's name there relative to
    # configs/experiment), and a fragment of the line that refuses it
    "interpolation_in_an_item": ([*MQAR, "mixers=[gated_deltanet,'${{oc.env:HOME}}']"], LITERAL),
    "resolver_in_an_item": ([*MQAR, "mixers=[gated_deltanet,'${{oc.create:{{_target_:os.mkdir,path:{outside}/marker}}}}']"],
                            LITERAL),
    "reference_as_an_item": ([*MQAR, "mixers=[gated_deltanet,${{model.name}}]"], LITERAL),
    "a_mixer_that_is_a_path": ([*MQAR, "mixers=[gated_deltanet,../../outside/evil]"], VARIANTS),
    "an_absolute_path": ([*MQAR, "mixers=[{outside}/evil,multihead]"], VARIANTS),
    "a_nested_list": ([*MQAR, "mixers=[[gated_deltanet],multihead]"], VARIANTS),
    "a_target_as_an_item": ([*MQAR, "mixers=[{{_target_:os.mkdir,path:{outside}/marker}},multihead]"], VARIANTS),
    "null_as_an_item": ([*MQAR, "mixers=[null,multihead]"], VARIANTS),
    "control_characters": ([*MQAR, "mixers=['\x1b]0;title\x07',multihead]"], VARIANTS),
    "a_swept_path": ([*MQAR, "model.mixers=choice([gated_deltanet,multihead],[multihead,../evil])"], VARIANTS),
    "a_glob": ([*MQAR, "mixers=glob(*)"], "glob() chooses among a config group's options"),
    "a_huge_list": (["experiment=mqar", "layers=4000", "mixers=[" + ",".join(["gated_deltanet"] * 4000) + "]"],
                    "a record replays overrides of at most 4096 characters"),
    "many_items": (["experiment=mqar", "layers=300", "mixers=[" + ",".join(["mla"] * 300) + "]"],
                   "a record replays at most 256 in one value"),
    "deeply_nested": ([*MQAR, "mixers=" + "[" * 1000 + "multihead" + "]" * 1000], "does not parse"),
    "an_experiment_list_with_a_path": (["experiment=[mqar,{evil}]"], "chooses only among the options of experiment"),
    "a_write_location": ([*MQAR, "mixers=[gated_deltanet,multihead]", "callbacks.model_checkpoint.dirpath={outside}"],
                         CONTAINED),
}
# The same records as YAML that a reader must refuse: an alias (a list read twice), and a tag that names code.
HOSTILE_YAML = {
    "a_yaml_alias": ("- experiment=mqar\n- &stack [gated_deltanet, multihead]\n- *stack\n", "uses a YAML alias"),
    "a_python_tag": ("- experiment=mqar\n- !!python/object/apply:os.mkdir ['{outside}/marker']\n", "not valid YAML"),
}


def hostile_record(tmp_path: Path, outside: Path, name: str, sweep: bool) -> Path:
    """A run dir (its train.log, as an interrupted run has one) or sweep dir whose record replays ``name``."""
    evil = os.path.relpath(outside / "evil", CONFIG_DIR / "experiment")
    (outside / "evil.yaml").write_text("# @package _global_\nhydra:\n  callbacks:\n    x:\n      _target_: os.mkdir\n"
                                       f"      path: {outside}/marker\n")
    if name in HOSTILE_YAML:
        text = HOSTILE_YAML[name][0].format(outside=outside)
        if not sweep:
            run_dir = interrupted_run_dir(tmp_path, [])
            (run_dir / ".hydra" / "overrides.yaml").write_text(text)
            (run_dir / "train.log").write_text("[...] building the data\n")
            return run_dir
        sweep_dir = fake_sweep(tmp_path, [], [])
        task = "\n".join("    " + line for line in text.splitlines())
        (sweep_dir / "multirun.yaml").write_text(f"hydra:\n  overrides:\n    hydra: []\n    task:\n{task}\n")
        return sweep_dir
    overrides = [*TINY, *(o.format(outside=outside, evil=evil) for o in HOSTILE[name][0])]
    if sweep:
        return fake_sweep(tmp_path, ["heads=1,2", *overrides], [])
    run_dir = interrupted_run_dir(tmp_path, overrides)
    (run_dir / "train.log").write_text("[...] building the data\n")
    return run_dir


@pytest.mark.parametrize("sweep", [False, True], ids=["run_dir", "sweep_dir"])
@pytest.mark.parametrize("name", [*HOSTILE, *HOSTILE_YAML])
def test_a_hostile_mqar_or_mixers_record_is_refused_in_one_line(tmp_path, outside, monkeypatch, name, sweep):
    """Each refused before the resume relaunches itself or starts the run: one ``resume=<dir> is invalid`` line,
    nothing written in the dir or beside it, no code of the record's run; a huge list before it is parsed."""
    where = hostile_record(tmp_path, outside, name, sweep)
    before = snapshot(tmp_path)
    monkeypatch.setattr(os, "execv", lambda *args: pytest.fail(f"resume={where} was relaunched instead of refused"))
    started = time.perf_counter()
    proc = run_in_process(TRAIN, f"resume={where}")
    took = time.perf_counter() - started
    line = assert_one_line_error(proc, (HOSTILE_YAML.get(name) or HOSTILE[name])[1])
    assert line.startswith(f"error: resume={where} is invalid: "), line
    assert not (outside / "marker").exists(), "the record's code ran"
    assert snapshot(tmp_path) == before, "the refused resume wrote something"
    assert took < 10, f"refused after {took:.0f} s"  # a 5,000-name list cost 19-42 s and 3.1 GB before


@pytest.mark.parametrize("sweeps, fragment", [
    (["seed=range(0,70)", "lr=range(1,70)"], "declares a sweep of 4830 jobs; a record replays a sweep of at most 4096"),
    (["seed=range(0,300)"], "sets seed to 300 items or values"),
])
def test_a_sweep_record_declares_a_bounded_sweep(tmp_path, monkeypatch, sweeps, fragment):
    """What the relaunched sweep would compose and run: each of a sweep's values is composed before it starts, and
    each of its jobs once it does. Refused on the record's text, before one is composed."""
    sweep_dir = fake_sweep(tmp_path, [*sweeps, *TINY], [])
    before = snapshot(tmp_path)
    monkeypatch.setattr(os, "execv", lambda *args: pytest.fail(f"resume={sweep_dir} was relaunched instead of refused"))
    started = time.perf_counter()
    proc = run_in_process(TRAIN, f"resume={sweep_dir}")
    took = time.perf_counter() - started
    line = assert_one_line_error(proc, fragment)
    assert line.startswith(f"error: resume={sweep_dir} is invalid: multirun.yaml "), line
    assert snapshot(tmp_path) == before
    assert took < 10, f"refused after {took:.0f} s"
