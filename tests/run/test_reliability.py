"""Ways to break the lab that must fail safely: a tampered run dir, a failed resume, two resumes at once,
trainer settings and unknown keys, signals at awkward moments, a full disk, a moved run dir."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_errors import assert_one_line_error

from conftest import (
    QUIET,
    TRAIN,
    run_in_process,
    run_script,
    run_train,
    script_env,
    signal_when,
    start_train,
    wait_until,
)

SMALL = ["task.train_size=256", "task.val_size=64", "trainer.val_check_interval=10",
         "callbacks.attention_maps.images=false", "~callbacks.early_stopping"]
# For runs whose tests look at no figure and no ablation: the final validation without them.
NO_IMAGES = ["~callbacks.head_score_maps", "ablation=[]"]


def record(run_dir: Path) -> dict[str, bytes]:
    """The files that make up a run's record, byte for byte."""
    names = [".hydra/overrides.yaml", ".hydra/config.yaml", "run_info.json", "metrics.json"]
    return {name: (run_dir / name).read_bytes() for name in names if (run_dir / name).exists()}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    """A short finished run (10 steps); tests copy it before changing anything."""
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    run_train(run_dir, "max_steps=10", *SMALL, *NO_IMAGES)
    return run_dir


def copy_of(run_dir: Path, tmp_path: Path, name: str = "copy") -> Path:
    target = tmp_path / name
    shutil.copytree(run_dir, target)
    return target


# --- a run dir is data, not code ---------------------------------------------------------------------------

@pytest.mark.parametrize(("tampered", "run"), [
    # As a user runs it, in a process of its own; the other spelling through the same entry function in-process.
    (["+callbacks.z._target_=os.system", "+callbacks.z.command='touch {marker}'"], run_script),
    (["hydra.callbacks.z._target_=os.system", "+hydra.callbacks.z.command='touch {marker}'"], run_in_process),
], ids=["callback target", "hydra callback"])
def test_tampered_overrides_are_rejected_and_run_nothing(finished_run, tmp_path, tampered, run):
    run_dir, marker = copy_of(finished_run, tmp_path), tmp_path / "marker"
    saved = (run_dir / ".hydra" / "overrides.yaml").read_text()
    lines = "".join(f"- {json.dumps(line.format(marker=marker))}\n" for line in tampered)
    (run_dir / ".hydra" / "overrides.yaml").write_text(saved + lines)
    before = record(run_dir)
    proc = run(TRAIN, f"resume={run_dir}", "max_steps=20", *QUIET)
    assert_one_line_error(proc, f"resume={run_dir}")
    assert not marker.exists(), "a tampered run dir ran code"
    assert record(run_dir) == before


def test_a_deeply_nested_run_info_stops_a_resume_in_one_line(finished_run, tmp_path):
    run_dir = copy_of(finished_run, tmp_path)
    (run_dir / "run_info.json").write_text('{"status": "ok", "error": ' + "[" * 20_000 + "]" * 20_000 + "}")
    before = record(run_dir)
    proc = run_in_process(TRAIN, f"resume={run_dir}", "max_steps=20", *QUIET)
    assert_one_line_error(proc, f"{run_dir / 'run_info.json'} is malformed: nested deeper than 100 levels")
    assert record(run_dir) == before and not (run_dir / "traceback.txt").exists()


# --- a failed resume leaves the run as it was ----------------------------------------------------------------

def test_failed_resume_does_not_poison_the_run(finished_run, tmp_path):
    run_dir = copy_of(finished_run, tmp_path)
    before = record(run_dir)
    proc = run_in_process(TRAIN, f"resume={run_dir}", "max_steps=20", "model=self", *QUIET)
    assert_one_line_error(proc, "model=self", f"resume={run_dir}", "model")
    assert record(run_dir) == before, "a resume that did not start changed the run's record"
    assert not (run_dir / "traceback.txt").exists()

    run_train(run_dir, f"resume={run_dir}", "max_steps=20")  # a plain resume still works
    assert json.loads((run_dir / "metrics.json").read_text())["global_step"] == 20
    info = json.loads((run_dir / "run_info.json").read_text())
    assert info["status"] == "ok" and info["attempts"] == 2
    assert "max_steps=20" in (run_dir / ".hydra" / "overrides.yaml").read_text()


# --- one resume at a time ------------------------------------------------------------------------------------

def test_two_resumes_at_once_only_one_trains(finished_run, tmp_path):
    run_dir = copy_of(finished_run, tmp_path)
    procs = [start_train(f"resume={run_dir}", "max_steps=100000") for _ in range(2)]
    try:
        # The loser gives up at once; the winner trains until stopped.
        loser = None
        deadline = time.monotonic() + 240
        while loser is None and time.monotonic() < deadline:
            loser = next((p for p in procs if p.poll() is not None), None)
            time.sleep(0.05)
        assert loser is not None, "neither resume was refused"
        winner = procs[1 - procs.index(loser)]
        _, stderr = loser.communicate()
        assert loser.returncode == 1 and "is training in" in stderr, stderr[-3000:]
        wait_until(lambda: json.loads((run_dir / "run_info.json").read_text()).get("status") == "running", winner,
                   "the winner's running state")
        assert winner.poll() is None, "the winner stopped too"
        winner.send_signal(signal.SIGTERM)
        winner.communicate(timeout=120)
        assert winner.returncode == 128 + signal.SIGTERM
        assert json.loads((run_dir / "run_info.json").read_text())["status"] == "interrupted"
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()


# --- settings Lightning would only reject once training started ------------------------------------------------

@pytest.mark.parametrize(("override", "fragment"), [
    ("trainer.devices=0", "trainer.devices=0"),
    ("trainer.val_check_interval=0", "trainer.val_check_interval=0"),
    ("trainer.log_every_n_steps=0", "trainer.log_every_n_steps=0"),
    ("trainer.max_epochs=-3", "trainer.max_epochs=-3"),
    ("optimized_metric=attention_entropy/layer9/head9", "optimized_metric=attention_entropy/layer9/head9"),
    ("+haeds=3", "did you mean heads"),
    ("+task.lenght=3", "did you mean task."),
    ("probe=", "probe='' is invalid"),
    ("probe='   '", "at least one word"),
    ("probe=', . !'", "at least one word"),
    ("model.context_length=1000000000", "model.context_length=1000000000 is invalid: it must be at most 4096"),
    ("layers=200000", "layers=200000 is invalid"),
    ("task.train_size=2000000000", "task.train_size=2000000000 is invalid"),
], ids=lambda v: v)
def test_rejected_before_the_run_dir_exists(tmp_path, override, fragment):
    run_dir = tmp_path / "run"
    # A Lightning setting as a user runs it (a process); the rest in-process. (A size that cannot fit imports torch
    # to say so: a process of its own would spend its time on that import.)
    run = run_script if override == "trainer.devices=0" else run_in_process
    proc = run(TRAIN, override, f"hydra.run.dir={run_dir}", *QUIET)
    assert_one_line_error(proc, fragment)
    assert not run_dir.exists()


@pytest.mark.parametrize(("overrides", "fragment"), [
    (["hydra/launcher=parallel", "hydra.launcher.n_jobs=0"], "hydra.launcher.n_jobs=0 is invalid"),
    (["hydra/launcher=parallel", "hydra.launcher.n_jobs=-5"], "hydra.launcher.n_jobs=-5 is invalid"),
    (["hparams_search=optuna", "hydra.sweeper.n_trials=0"], "hydra.sweeper.n_trials=0 is invalid"),
], ids=lambda v: str(v))
def test_sweep_settings_rejected_before_the_sweep_dir_exists(tmp_path, overrides, fragment):
    sweep_dir = tmp_path / "sweep"
    run = run_script if "hydra.launcher.n_jobs=0" in overrides else run_in_process  # one as a process
    proc = run(TRAIN, "-m", "heads=1,2", *overrides, f"hydra.sweep.dir={sweep_dir}", *QUIET)
    assert_one_line_error(proc, fragment)
    assert not sweep_dir.exists()


def test_an_oversized_corpus_is_refused_before_it_is_read(tmp_path):
    corpus, run_dir = tmp_path / "huge.txt", tmp_path / "run"
    with open(corpus, "wb") as handle:  # sparse: 11 MiB on paper, nothing on disk
        handle.truncate(11 * 2**20)
    proc = run_in_process(TRAIN, f"task.corpus={corpus}", f"hydra.run.dir={run_dir}", *QUIET)
    assert_one_line_error(proc, f"task.corpus={corpus} is invalid", "at most 10 MiB")
    assert not run_dir.exists()


# --- every signal ends in a recorded state ---------------------------------------------------------------------

def test_quick_double_ctrl_c_is_recorded(tmp_path):
    """The second Ctrl-C lands inside the same (slow) training step as the first: Lightning turns it into
    exit status 1; the run must still end as interrupted, with its message and exit status 130."""
    run_dir = tmp_path / "run"
    # Steps of a few tenths of a second on one thread: the two signals, 20 ms apart, land in one step.
    slow = ["d_model=256", "heads=8", "layers=2", "batch_size=256", "threads=1"]
    # last.ckpt after the first step (validated after each): training is under way, without waiting for ten.
    proc = start_train("max_steps=100000", *SMALL, *NO_IMAGES, *slow, "trainer.val_check_interval=1",
                       f"hydra.run.dir={run_dir}")
    _, stderr = signal_when(proc, lambda: (run_dir / "checkpoints" / "last.ckpt").exists(), "training",
                            signal.SIGINT, signal.SIGINT)
    assert proc.returncode == 130 and "Traceback" not in stderr, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.startswith("interrupted: ")]
    assert len(lines) == 1 and f"resume={run_dir}" in lines[0], stderr[-3000:]
    assert json.loads((run_dir / "run_info.json").read_text())["status"] == "interrupted"


# A Ctrl-C that lands as torch.save is about to finish a checkpoint's archive (as its writer's __exit__ starts):
# the writer is left unfinished, kept by the exception's traceback, and finishes the archive when that is freed.
CTRL_C_AS_THE_ARCHIVE_ENDS = """
import gc, signal, sys
import torch
from attention_lab.records.checkpoints import AtomicCheckpointIO

def ctrl_c_as_the_archive_ends(frame, event, arg):
    if event == "call" and frame.f_code.co_name == "__exit__" and frame.f_code.co_filename == torch.serialization.__file__:
        signal.raise_signal(signal.SIGINT)  # Python's own handler: KeyboardInterrupt, here
    return None

sys.settrace(ctrl_c_as_the_archive_ends)
try:
    AtomicCheckpointIO().save_checkpoint({"w": torch.zeros(1000)}, sys.argv[1])
except KeyboardInterrupt as err:
    interrupted = err  # kept, as the run keeps what ended it until it has recorded it
sys.settrace(None)
del interrupted
gc.collect()
print("freed")
"""


def test_ctrl_c_as_a_checkpoint_archive_ends_leaves_nothing_to_write_at_exit(tmp_path):
    """A second Ctrl-C can land inside a checkpoint's write, at any moment of it: freeing the interrupted write
    later (at exit) must not write into a file the lab has closed meanwhile (the process aborted with SIGABRT,
    'write to closed file', instead of exiting 130). Only a process shows an abort."""
    path = tmp_path / "last.ckpt"
    proc = subprocess.run([sys.executable, "-c", CTRL_C_AS_THE_ARCHIVE_ENDS, str(path)], env=script_env(),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and proc.stdout.split() == ["freed"], (proc.returncode, proc.stderr[-3000:])
    assert not path.exists() and list(tmp_path.iterdir()) == [], "no checkpoint, and no temp file left behind"


def logged_tags(run_dir: Path) -> set[str]:
    """The scalar tags in a run's TensorBoard events."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from attention_lab.records.files import tensorboard_dir

    return set(EventAccumulator(str(tensorboard_dir(run_dir))).Reload().Tags()["scalars"])


def test_sigterm_during_the_final_validation_stops_it_at_once_and_is_recorded(tmp_path):
    run_dir = tmp_path / "run"
    # No validation during training, and a large validation set: the final validation and its head-ablation
    # passes take tens of seconds, so the signal (sent as they start) lands inside them.
    proc = start_train("max_steps=5", "task=copy", "task.train_size=256", "task.val_size=50000",
                       "trainer.val_check_interval=100000", "callbacks.attention_maps.images=false",
                       "~callbacks.early_stopping", f"hydra.run.dir={run_dir}")
    try:
        for line in proc.stdout:
            if "final validation" in line:
                proc.send_signal(signal.SIGTERM)
                break
        _, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    assert any(line.startswith("interrupted: ") for line in stderr.splitlines()), stderr[-3000:]
    assert json.loads((run_dir / "run_info.json").read_text())["status"] == "interrupted"
    assert not (run_dir / "metrics.json").exists()
    # Stopped inside it: a final validation that ran to its end would have logged its val/ metrics.
    assert list((run_dir / "tensorboard").rglob("events.out.tfevents.*"))
    assert not any("val/" in tag for tag in logged_tags(run_dir)), sorted(logged_tags(run_dir))


def test_sigterm_while_the_data_is_built_stops_the_run_before_the_model_exists(tmp_path):
    run_dir = tmp_path / "run"
    # Legal, and minutes to build in Python: the signal, sent as the building starts, must not wait for it.
    proc = start_train("task.train_size=4000000", f"hydra.run.dir={run_dir}")
    try:
        for line in proc.stdout:
            if "building the data" in line:
                proc.send_signal(signal.SIGTERM)
                break
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, stderr[-3000:]
    lines = [line for line in stderr.splitlines() if line.startswith("interrupted: ")]
    assert len(lines) == 1 and "while the data was built" in lines[0], stderr[-3000:]
    assert json.loads((run_dir / "run_info.json").read_text())["status"] == "interrupted"
    # Nothing of a model: no checkpoint, no TensorBoard run (its logger comes with the trainer), no metrics.
    assert not (run_dir / "checkpoints").exists() and not (run_dir / "tensorboard").exists()
    assert not (run_dir / "metrics.json").exists()


# --- no half-written checkpoints -------------------------------------------------------------------------------

def test_checkpoint_write_on_a_full_disk_keeps_the_previous_one(small_filesystem):
    from attention_lab.records.checkpoints import AtomicCheckpointIO, load_checkpoint

    path = small_filesystem / "last.ckpt"
    io = AtomicCheckpointIO()
    io.save_checkpoint({"global_step": 1, "w": torch.zeros(10)}, path)
    before = path.read_bytes()
    with pytest.raises((OSError, RuntimeError)):  # 1 MiB does not fit (torch reports ENOSPC either way)
        io.save_checkpoint({"global_step": 2, "w": torch.zeros(256 * 1024)}, path)
    assert path.read_bytes() == before and load_checkpoint(path)["global_step"] == 1
    assert sorted(p.name for p in small_filesystem.iterdir()) == ["last.ckpt"], "no temp file left behind"


def last_step(run_dir: Path) -> int:
    return int(torch.load(run_dir / "checkpoints" / "last.ckpt", weights_only=True)["global_step"])


def test_corrupt_last_checkpoint_falls_back_to_a_valid_one(interrupted_run, tmp_path):
    run_dir = copy_of(interrupted_run, tmp_path)
    assert last_step(run_dir) < 30
    last = run_dir / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:1000])  # truncated, as by a full disk
    best_step = int(torch.load(run_dir / "checkpoints" / "best.ckpt", weights_only=True)["global_step"])
    proc = run_train(run_dir, f"resume={run_dir}", "max_steps=30")
    output = proc.stdout + proc.stderr
    assert "does not load" in output and f"step {best_step}" in output, output[-3000:]
    assert json.loads((run_dir / "metrics.json").read_text())["global_step"] == 30


# --- resume from the dir you were given --------------------------------------------------------------------------

def checkpoint_state(path: Path) -> dict:
    """The model-checkpoint callback's state saved in a checkpoint file."""
    callbacks = torch.load(path, weights_only=True)["callbacks"]
    (state,) = [value for key, value in callbacks.items() if "ModelCheckpoint" in key]
    return state


def test_moved_run_dir_resumes_from_its_own_checkpoints(interrupted_run, tmp_path):
    original = interrupted_run  # its records name this dir; the copy is the run moved elsewhere
    step = last_step(original)
    best_before = float(checkpoint_state(original / "checkpoints" / "last.ckpt")["best_model_score"])
    kept = {path.relative_to(original): path.read_bytes() for path in original.rglob("*") if path.is_file()}
    moved = copy_of(original, tmp_path, "moved")
    proc = run_in_process(TRAIN, f"resume={moved}", "max_steps=60", *QUIET, check=True)
    assert f"from {moved / 'checkpoints'}" in proc.stdout + proc.stderr
    now = {path.relative_to(original): path.read_bytes() for path in original.rglob("*") if path.is_file()}
    assert now == kept, "the old path was written to"
    assert sorted(p.name for p in (moved / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
    resumed = torch.load(moved / "checkpoints" / "last.ckpt", weights_only=True)
    assert resumed["global_step"] == 60 > step
    assert json.loads((moved / "metrics.json").read_text())["global_step"] == 60
    # The best score survived the move: best.ckpt is replaced only by a better model, and its path is the new one.
    state = checkpoint_state(moved / "checkpoints" / "last.ckpt")
    assert state["best_model_path"] == str(moved / "checkpoints" / "best.ckpt")
    assert float(state["best_model_score"]) >= best_before


def test_checkpoint_state_follows_the_run_dir(tmp_path):
    """The state a checkpoint keeps about the best model is read relative to the dir the run is in now."""
    from attention_lab.callbacks.lifecycle import RunDirModelCheckpoint

    old, new = tmp_path / "old" / "checkpoints", tmp_path / "new" / "checkpoints"
    saved = RunDirModelCheckpoint(dirpath=old, monitor="val/seq_acc", mode="max", save_last=True)
    saved.best_model_score, saved.best_model_path = torch.tensor(0.75), str(old / "best.ckpt")
    saved.best_k_models, saved.last_model_path = {str(old / "best.ckpt"): torch.tensor(0.75)}, str(old / "last.ckpt")
    loaded = RunDirModelCheckpoint(dirpath=new, monitor="val/seq_acc", mode="max", save_last=True)
    loaded.load_state_dict(saved.state_dict())
    assert float(loaded.best_model_score) == 0.75
    assert loaded.best_model_path == str(new / "best.ckpt") and loaded.last_model_path == str(new / "last.ckpt")
    assert list(loaded.best_k_models) == [str(new / "best.ckpt")]
