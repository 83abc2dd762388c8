"""A record that the lab reads is bounded: one larger than the lab ever writes, nested deeper, or expanding through
YAML aliases is refused in one line, at once, instead of taking minutes and gigabytes (or a RecursionError
traceback). Every payload is real: a 5.4 MB overrides.yaml and multirun.yaml, 20,000 levels of brackets, a
YAML "billion laughs"."""

from __future__ import annotations

import json

import pytest
from test_errors import assert_one_line_error
from test_sweep_resume import snapshot

from attention_lab.errors import ConfigError
from attention_lab.records.files import (
    MAX_RECORD_DEPTH,
    UnreadableRecord,
    read_json_record,
    read_yaml_record,
    record_limit,
)
from attention_lab.run.resume import plan_resume
from attention_lab.run.sweep_resume import command_line
from conftest import CONFIG_DIR, TRAIN, run_in_process

HUGE_OVERRIDES = "- heads=2\n" * 540_000  # 5.4 MB of plain overrides
DEEP = 20_000  # levels of brackets: 40 KB, within every limit, far past Python's recursion limit
BILLION_LAUGHS = "".join(f"- &l{n} [{', '.join([f'*l{n - 1}'] * 9 if n else ['lol'] * 9)}]\n" for n in range(10))


def run_dir_with(tmp_path, overrides: str):
    """A run dir as far as a resume first reads it: its saved overrides."""
    run_dir = tmp_path / "run"
    (run_dir / ".hydra").mkdir(parents=True)
    (run_dir / ".hydra" / "overrides.yaml").write_text(overrides)
    return run_dir


def test_a_huge_overrides_yaml_is_refused_in_one_line(tmp_path):
    run_dir = run_dir_with(tmp_path, HUGE_OVERRIDES)
    before = snapshot(run_dir)
    proc = run_in_process(TRAIN, f"resume={run_dir}")
    assert_one_line_error(proc, f"resume={run_dir} is invalid", "overrides.yaml is unreadable: larger than 64 KiB")
    assert snapshot(run_dir) == before


@pytest.mark.parametrize(("text", "problem"), [
    ("[" * DEEP + "]" * DEEP, f"nested deeper than {MAX_RECORD_DEPTH} levels"),
    (BILLION_LAUGHS, "uses a YAML alias"),
], ids=["deep", "billion_laughs"])
def test_a_resume_refuses_overrides_that_nest_or_expand(tmp_path, text, problem):
    run_dir = run_dir_with(tmp_path, text)
    with pytest.raises(ConfigError) as raised:
        plan_resume(str(run_dir), [])
    assert "\n" not in str(raised.value) and f"overrides.yaml is unreadable: {problem}" in str(raised.value)


@pytest.mark.parametrize(("task", "problem"), [
    (["heads=1,2"] * 450_000, "larger than 1 MiB"),
    ("[" * DEEP + "]" * DEEP, f"nested deeper than {MAX_RECORD_DEPTH} levels"),
], ids=["huge", "deep"])
def test_a_sweep_resume_refuses_a_multirun_yaml_out_of_bounds(tmp_path, task, problem):
    sweep_dir = tmp_path / "sweep"
    sweep_dir.mkdir()
    task_text = task if isinstance(task, str) else json.dumps(task)
    (sweep_dir / "multirun.yaml").write_text(f'{{"hydra": {{"overrides": {{"task": {task_text}, "hydra": []}}}}}}')
    with pytest.raises(ConfigError) as raised:
        command_line([f"resume={sweep_dir}"], CONFIG_DIR)
    assert "\n" not in str(raised.value) and f"multirun.yaml is unreadable: {problem}" in str(raised.value)


def test_the_reader_stops_at_the_limit(tmp_path):
    """A record is read no further than its limit: a 'file' without end (a device) is refused as too large."""
    path = tmp_path / "metrics.json"
    path.symlink_to("/dev/zero")
    with pytest.raises(UnreadableRecord) as raised:
        read_json_record(path)
    assert raised.value.problem == "larger than 64 MiB, the most the lab reads of metrics.json"
    assert record_limit(tmp_path / "overrides.yaml") < record_limit(tmp_path / "multirun.yaml") < record_limit(path)


@pytest.mark.parametrize(("text", "problem"), [
    ("a: !!float x\n", "not valid YAML (a value its tag's type refuses: ValueError)"),
    ("a: [unclosed\n", "not valid YAML (line 2, column 1)"),
    ("a: !!python/object:os.system x\n", "not valid YAML (line 1, column 4)"),
    ("\xff\xfe".encode("latin-1").decode("utf-8", "surrogateescape"), "not UTF-8 text"),
])
def test_a_broken_yaml_record_is_one_problem(tmp_path, text, problem):
    path = tmp_path / "config.yaml"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(UnreadableRecord) as raised:
        read_yaml_record(path)
    assert raised.value.problem == problem


def test_every_yaml_record_a_sweep_writes_reads_as_the_reference_parser_reads_it(finished_sweep):
    """The reader parses with libyaml where PyYAML has it: the same data as PyYAML's own pure-Python parser."""
    import yaml

    records = sorted(finished_sweep.rglob("*.yaml"))
    assert {path.name for path in records} >= {"multirun.yaml", "config.yaml", "hydra.yaml", "overrides.yaml"}
    for path in records:
        assert read_yaml_record(path) == yaml.load(path.read_text(encoding="utf-8"), Loader=yaml.SafeLoader), path
