"""run_info.json is one typed record (RunInfo, RunStatus) that run/ writes and reads and review/ reads, with one
rule for a job whose process is gone: the sweep summary and compare.py agree on it."""

from __future__ import annotations

import json
import os
import socket
import subprocess

import pytest

from attention_lab.records.run_record import ENDED_WITHOUT_RESULT, MalformedRunInfo, RunInfo, RunStatus, parse
from attention_lab.review.sweep import collect_sweep
from attention_lab.run.sweep_resume import JobAction, job_plan
from attention_lab.run.sweep_summary import write_summary


def gone_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_a_record_round_trips_with_its_status_as_text(tmp_path):
    record = RunInfo(status=RunStatus.INTERRUPTED, error="SIGTERM at step 3", job=2, overrides=["heads=2"],
                       attempts=1, wall_time_s=1.5, pid=os.getpid(), host=socket.gethostname())
    path = tmp_path / "run_info.json"
    record.write(path)
    assert json.loads(path.read_text())["status"] == "interrupted"
    assert RunInfo.read(path) == record
    assert RunInfo.read(tmp_path / "missing.json") is None


@pytest.mark.parametrize(("data", "problem"), [
    ({"status": "finished"}, "status is \"finished\", expected one of starting, running, ok, failed, interrupted"),
    ({"job": "three"}, "job is \"three\", expected int"),
    ({"attempts": True}, "attempts is true, expected int"),
    ({"overrides": ["a", 1]}, "overrides holds something other than text"),
    ({"pid": -4}, "pid is -4, expected a process id"),
])
def test_a_field_of_the_wrong_type_is_named(tmp_path, data, problem):
    record, problems = parse({"status": "ok", "error": None, **data})
    assert problems == [problem]
    path = tmp_path / "run_info.json"
    path.write_text(json.dumps(data))
    with pytest.raises(MalformedRunInfo) as info:
        RunInfo.read(path)
    assert str(info.value) == f"{path} is malformed: {problem}"


def test_one_rule_for_a_job_whose_process_is_gone(tmp_path):
    here = socket.gethostname()
    assert RunInfo(status=RunStatus.RUNNING, pid=gone_pid(), host=here).ended_without_result()
    assert RunInfo(status=RunStatus.STARTING, pid=gone_pid(), host=here).ended_without_result()
    assert not RunInfo(status=RunStatus.RUNNING, pid=os.getpid(), host=here).ended_without_result()
    assert not RunInfo(status=RunStatus.RUNNING, pid=gone_pid(), host=here + "-elsewhere").ended_without_result()
    assert RunInfo(status=RunStatus.RUNNING, host=here + "-elsewhere").ended_without_result(sweep_over=True)
    assert not RunInfo(status=RunStatus.OK, pid=gone_pid(), host=here).ended_without_result(sweep_over=True)

    # A sweep whose job 0 died while running: the summary (while the sweep goes on) and compare.py both say failed.
    sweep_dir = tmp_path / "sweep"
    for job, record in enumerate([RunInfo(status=RunStatus.RUNNING, job=0, overrides=["heads=1"], pid=gone_pid(),
                                            host=here),
                                  RunInfo(status=RunStatus.RUNNING, job=1, overrides=["heads=2"], pid=os.getpid(),
                                            host=here)]):
        (sweep_dir / str(job) / ".hydra").mkdir(parents=True)
        (sweep_dir / str(job) / ".hydra" / "overrides.yaml").write_text(f"- heads={job + 1}\n")
        record.write(sweep_dir / str(job) / "run_info.json")
    rows = write_summary(sweep_dir)["jobs"]
    assert [(row["status"], row["error"]) for row in rows] == [("failed", ENDED_WITHOUT_RESULT), ("running", None)]
    assert [job.status for job in collect_sweep(sweep_dir).jobs] == ["failed", "running"]


def test_a_resumed_sweep_plans_each_job_by_its_status(tmp_path):
    for status, action in ((RunStatus.OK, JobAction.KEEP), (RunStatus.INTERRUPTED, JobAction.CONTINUE),
                           (RunStatus.FAILED, JobAction.RESTART), (None, JobAction.RESTART)):
        job_dir = tmp_path / (status.value if status else "none") / "0"
        job_dir.mkdir(parents=True)
        (job_dir / "metrics.json").write_text('{"val/seq_acc": 0.5}')
        RunInfo(status=status, job=0).write(job_dir / "run_info.json")
        plan = job_plan(job_dir, ["heads=1"], "val/seq_acc")
        assert plan.action is action and plan.metric == (0.5 if action is JobAction.KEEP else None)
