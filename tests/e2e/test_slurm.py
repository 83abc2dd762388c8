"""Sweeps on a real SLURM cluster: the one-node cluster of `make slurm-up` (scripts/slurm/), started for this
module and stopped after it (unless it was already running). Jobs go through sbatch (hydra-submitit-launcher,
`hydra/launcher=slurm_local`), are seen by squeue and sacct, and end as complete run dirs; a cancelled or
timed-out job is recorded and its sweep ends; a timed-out job resumes; DDP runs over two SLURM tasks; a folded
product sweep submits each distinct job once (one array task each) and says which combination was folded into which.

Without Debian's packages (or without root, which slurmd needs) the tests skip, except in CI (CI=true),
where .ci/run installs them and they fail.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from filelock import FileLock

from conftest import QUIET, ROOT, TRAIN, run_in_process, run_train, script_env

# Minutes of waiting on the cluster (a job's time limit, accounting): started before the other tests, which run
# beside them (conftest.py). One module: its tests run one at a time, on one worker.
pytestmark = pytest.mark.early

SLURM_DIR = ROOT / "scripts" / "slurm"
STATE_DIR = Path(os.environ.get("ATTENTION_LAB_SLURM_DIR", "/tmp/attention-lab-slurm"))
NEEDED = ("sbatch", "squeue", "sacct", "scancel", "slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd")
LAUNCHER = "hydra/launcher=slurm_local"
STEPS = 10
NO_IMAGES = ["callbacks.attention_maps.images=false", "~callbacks.head_score_maps", "ablation=[]"]
TINY = ["model=self", f"max_steps={STEPS}", "task.train_size=64", "task.val_size=32", *NO_IMAGES]
# Trains until a signal stops it: no early stopping, more steps than any test waits for; its first checkpoint (a
# validation writes last.ckpt) after 10 steps.
ENDLESS = ["model=self", "max_steps=1000000", "task.train_size=256", "task.val_size=32", *NO_IMAGES,
           "~callbacks.early_stopping", "trainer.val_check_interval=10"]
CLUSTER_WAIT_S = 1800  # another suite's SLURM tests take a few minutes
SWEEP_TIMEOUT = 180  # seconds; submitit notices a job that ended without a result within half the job's age


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


def slurm(*args: str) -> str:
    return subprocess.run(list(args), check=True, capture_output=True, text=True, timeout=30).stdout


def cluster_running() -> bool:
    """Whether the cluster's controller runs, found as scripts/slurm/down.sh finds it: by its pid file."""
    try:
        pid = (STATE_DIR / "slurmctld.pid").read_text().strip()
        return Path(f"/proc/{pid}/comm").read_text().strip() == "slurmctld"
    except OSError:
        return False


@pytest.fixture(scope="module", autouse=True)
def cluster():
    missing = [tool for tool in NEEDED if shutil.which(tool) is None]
    reason = (f"{', '.join(missing)} not found (Debian: apt-get install slurm-wlm slurmdbd munge mariadb-server; "
              ".ci/run installs them)" if missing else
              "the SLURM daemons need root" if os.geteuid() != 0 else None)
    if reason:
        if in_ci():
            pytest.fail(f"{reason}: required in CI")
        pytest.skip(reason)
    # One test suite at a time uses the cluster (two `make test` side by side): the other waits here, so that
    # neither stops the cluster under the other's jobs.
    with FileLock(str(STATE_DIR.parent / f"{STATE_DIR.name}.lock"), timeout=CLUSTER_WAIT_S), \
            pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLURM_CONF", str(STATE_DIR / "slurm.conf"))  # whether or not /etc/slurm/slurm.conf is ours
        running = cluster_running()
        subprocess.run([SLURM_DIR / "up.sh"], check=True, timeout=120)
        yield
        if not running:  # a cluster someone had started stays up
            subprocess.run([SLURM_DIR / "down.sh"], check=True, timeout=180)


def start_sweep(sweep_dir: Path, *overrides: str) -> subprocess.Popen:
    args = [sys.executable, str(TRAIN), "-m", LAUNCHER, *overrides, *QUIET, f"hydra.sweep.dir={sweep_dir}"]
    return subprocess.Popen(args, cwd=ROOT, env=script_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)


def finish(sweep: subprocess.Popen, timeout: float = SWEEP_TIMEOUT) -> str:
    """The sweep's output once it has ended; it must end by itself within ``timeout``."""
    try:
        output, _ = sweep.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        sweep.kill()
        raise AssertionError(f"the sweep did not end within {timeout}s:\n{sweep.communicate()[0][-3000:]}") from None
    return output


def job_ids(sweep_dir: Path) -> list[str]:
    """The SLURM job ids of a sweep: submitit names a folder after each job (`<array id>_<index>`, or the plain
    job id for a sweep of one job)."""
    folder = sweep_dir / ".submitit"
    names = sorted(p.name for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []
    return [n for n in names if "_" in n] or names  # an array's own folder holds only its script


def wait_for(condition, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while not (value := condition()):
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        time.sleep(0.5)
    return value


def accounted_states(ids: list[str]) -> dict[str, str]:
    """The jobs' final states as sacct shows them (accounting is written shortly after a job ends)."""
    def states() -> dict[str, str] | None:
        rows = slurm("sacct", "--noheader", "--parsable2", "--allocations", "--format=JobID,State",
                     *[f"--jobs={i}" for i in ids]).splitlines()
        found = dict(row.split("|")[:2] for row in rows)
        done = {i: found[i].split()[0] for i in ids if i in found}  # "CANCELLED by 0" -> CANCELLED
        return done if len(done) == len(ids) and "RUNNING" not in done.values() else None
    return wait_for(states, 30, f"sacct shows no final state for {ids}")


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def summary_row(sweep_dir: Path, job: int) -> dict:
    return next(row for row in read(sweep_dir / "sweep_summary.json")["jobs"] if row["job"] == job)


def cancel(ids: list[str]) -> None:
    """Leave no job behind, whatever the test's outcome."""
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, timeout=30)


FOLD_LINE = "folded: model=self heads=2 into job 0 (model=self heads=1): with model=self, nothing reads heads"


@pytest.mark.timeout(300, func_only=True)  # not the wait for the cluster
def test_a_folded_sweep_submits_each_distinct_job_once_through_sbatch(tmp_path: Path):
    sweep_dir = tmp_path / "sweep"
    sweep = start_sweep(sweep_dir, *TINY, "model=self,multihead", "heads=1,2")
    try:
        # Queued or running, the sweep's job array shows in squeue under the job's name (`train`).
        def ours() -> set[str]:
            return {line for line in slurm("squeue", "--noheader", "--format=%F %j").splitlines()
                    if line.endswith(" train")}
        queued = wait_for(ours, 60, "squeue shows no job of the sweep")
        output = finish(sweep)
        assert sweep.returncode == 0, output[-3000:]
        assert FOLD_LINE in output
        ids = job_ids(sweep_dir)
        assert len(ids) == 3 and {f"{i.split('_')[0]} train" for i in ids} <= queued, queued
        assert set(accounted_states(ids).values()) == {"COMPLETED"}
    finally:
        cancel(job_ids(sweep_dir))
    summary = read(sweep_dir / "sweep_summary.json")
    assert (summary["total"], summary["counts"]) == (3, {"ok": 3})
    shown = [{o for o in row["overrides"] if o.startswith(("model=", "heads="))} for row in summary["jobs"]]
    assert shown == [{"model=self", "heads=1"}, {"model=multihead", "heads=1"}, {"model=multihead", "heads=2"}]
    assert [fold["into"] for fold in summary["folded"]] == [0]
    for row in summary["jobs"]:
        job_dir = Path(row["output_dir"])
        assert row["status"] == "ok" and row["metrics"]["global_step"] == STEPS
        assert read(job_dir / "run_info.json")["status"] == "ok"
        assert read(job_dir / "metrics.json")["global_step"] == STEPS
        assert (job_dir / "checkpoints" / "last.ckpt").is_file() and (job_dir / ".hydra" / "config.yaml").is_file()
        assert list(job_dir.glob("tensorboard/**/events.out.tfevents.*"))


@pytest.mark.timeout(300, func_only=True)
def test_cancelled_and_warned_jobs_are_recorded_and_their_sweep_ends(tmp_path: Path):
    """`scancel`: SIGTERM (SIGKILL after KillWait). `scancel --signal=USR2`: submitit's warning, which SLURM sends
    `signal_delay_s` before a job's time limit. Either run stops at the end of a step, and the sweep ends."""
    sweep_dir = tmp_path / "sweep"
    sweep = start_sweep(sweep_dir, *ENDLESS, "model=self,multihead")
    infos = [sweep_dir / str(job) / "run_info.json" for job in (0, 1)]
    try:
        # Training, past its first validation: each job's last.ckpt exists (written at every validation).
        checkpoints = [sweep_dir / str(job) / "checkpoints" / "last.ckpt" for job in (0, 1)]
        wait_for(lambda: all(c.is_file() for c in checkpoints), 180, "the jobs did not reach their first validation")
        cancelled, warned = job_ids(sweep_dir)  # array indices 0 and 1: the sweep's jobs 0 and 1
        subprocess.run(["scancel", cancelled], check=True, timeout=30)
        subprocess.run(["scancel", "--signal=USR2", warned], check=True, timeout=30)
        output = finish(sweep)
        assert sweep.returncode != 0, output[-3000:]  # the sweep reports the jobs that did not succeed
        # Each stopped job returned its result: the sweep ends with its summary, no submitit traceback.
        assert "error: sweep finished with" in output and "UncompletedJobError" not in output, output[-3000:]
        wait_for(lambda: read(infos[1]).get("status") != "running", 60, "the warned job did not stop")
        states = accounted_states([cancelled, warned])
        assert states[cancelled] == "CANCELLED" and states[warned] != "CANCELLED", states
    finally:
        cancel(job_ids(sweep_dir))
    assert read(infos[0])["status"] in ("interrupted", "failed")
    assert read(infos[1])["status"] == "interrupted"
    assert (sweep_dir / "1" / "checkpoints" / "last.ckpt").is_file()
    assert summary_row(sweep_dir, 0)["status"] in ("interrupted", "failed")
    assert summary_row(sweep_dir, 1)["status"] == "interrupted"


def checkpoint_step(path: Path) -> int:
    import torch

    return int(torch.load(path, map_location="cpu", weights_only=True)["global_step"])


@pytest.mark.timeout(420, func_only=True)
def test_a_job_past_its_time_limit_is_recorded_and_resumes(tmp_path: Path):
    """The shortest SLURM time limit, a minute; submitit's early warning (SIGUSR2) off, so that SLURM's own
    SIGTERM at the limit stops the run (SLURM enforces limits every 30 s: it comes within 60-90 s). Once the job has
    a checkpoint, its process is stopped (SIGSTOP) until then: it waits without taking a core from the other tests,
    and SLURM continues a job's stopped tasks before it signals them (SIGCONT, then SIGTERM)."""
    sweep_dir, job_dir = tmp_path / "sweep", tmp_path / "sweep" / "0"
    sweep = start_sweep(sweep_dir, *ENDLESS, "hydra.launcher.timeout_min=1", "hydra.launcher.signal_delay_s=0")
    try:
        wait_for(lambda: (job_dir / "checkpoints" / "last.ckpt").is_file(), 150, "the job reached no validation")
        os.kill(read(job_dir / "run_info.json")["pid"], signal.SIGSTOP)
        output = finish(sweep, timeout=SWEEP_TIMEOUT + 120)
        assert sweep.returncode != 0, output[-3000:]
        ids = job_ids(sweep_dir)
        assert accounted_states(ids) == {ids[0]: "TIMEOUT"}
    finally:
        cancel(job_ids(sweep_dir))
    assert read(job_dir / "run_info.json")["status"] in ("interrupted", "failed")
    assert summary_row(sweep_dir, 0)["status"] in ("interrupted", "failed")

    step = checkpoint_step(job_dir / "checkpoints" / "last.ckpt")
    assert step > 0
    run_in_process(TRAIN, f"resume={job_dir}", f"max_steps={step + 20}", check=True)  # a run dir: no relaunch
    info = read(job_dir / "run_info.json")
    assert (info["status"], info["attempts"]) == ("ok", 2)
    assert read(job_dir / "metrics.json")["global_step"] == step + 20
    assert summary_row(sweep_dir, 0)["status"] == "ok"


@pytest.mark.timeout(300, func_only=True)
def test_ddp_over_two_slurm_tasks_gives_the_metrics_of_one_process(tmp_path: Path):
    sweep_dir = tmp_path / "sweep"
    ddp = ["trainer=ddp_sim", "trainer.strategy=ddp", "hydra.launcher.tasks_per_node=2"]
    sweep = start_sweep(sweep_dir, *TINY, *ddp)
    try:
        output = finish(sweep)
        assert sweep.returncode == 0, output[-3000:]
    finally:
        cancel(job_ids(sweep_dir))
    job_dir = sweep_dir / "0"
    # One SLURM job of two tasks, each a rank of the same run (submitit keeps one result per task).
    assert len(list((sweep_dir / ".submitit").glob("*/*_result.pkl"))) == 2
    assert read(job_dir / "run_info.json")["status"] == "ok"
    single = tmp_path / "single"
    run_train(single, *TINY)
    assert sorted(read(job_dir / "metrics.json")) == sorted(read(single / "metrics.json"))
    assert read(job_dir / "metrics.json")["global_step"] == STEPS
