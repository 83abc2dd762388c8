"""scripts/start_tensorboard.py: TensorBoard over a run serves every step the run logged, where plain `tensorboard`
drops all but 10 of a tag's images and all but 100 (10 with --load_fast=false) of the attention tab's steps; a
logdir that is not a directory is one line, before anything starts."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import IMAGES, EventAccumulator

from attention_lab.records.commands import script_command
from attention_lab.records.files import tensorboard_dir
from conftest import ROOT, run_script, run_train
from tab_runs import write_run
from tb_server import TensorBoard, serve

SCRIPT = ROOT / "scripts" / "start_tensorboard.py"
TAG = "attention/layer1/head0"
TENSORBOARD_DEFAULT_IMAGES = 10  # what TensorBoard keeps of an image tag unless told otherwise


@pytest.fixture(scope="module")
def many_maps_run(tmp_path_factory) -> Path:
    """A run that logs its attention maps at more steps than TensorBoard keeps by default."""
    run_dir = tmp_path_factory.mktemp("many_maps") / "run"
    run_train(run_dir, "max_steps=36", "log_attention_every_n_steps=3", "callbacks.attention_maps.image_every_n_steps=3",
              "trainer.val_check_interval=3",
              "task.train_size=256", "task.val_size=64", "~callbacks.early_stopping", "ablation=[]")
    return run_dir


def logged_steps(run_dir: Path) -> list[int]:
    events = EventAccumulator(str(tensorboard_dir(run_dir)), size_guidance={IMAGES: 0}).Reload()
    return sorted({event.step for event in events.Images(TAG)})


def served_steps(server: TensorBoard) -> list[int]:
    runs = [run for run, tags in server.get_json("/data/plugin/images/tags").items() if TAG in tags]
    if not runs:
        return []
    (run,) = runs
    return sorted({image["step"] for image in server.get_json("/data/plugin/images/images", run=run, tag=TAG)})


@pytest.fixture
def served(many_maps_run: Path, tmp_path: Path, request) -> Iterator[TensorBoard]:
    """The server started by ``request.param``, once it serves the run's last map (the loader keeps the newest
    step of a tag, whatever else it drops: then the event file has been read to its end)."""
    last = logged_steps(many_maps_run)[-1]
    with serve(many_maps_run, tmp_path / "server.log", lambda server: last in served_steps(server),
               launcher=request.param) as server:
        yield server


@pytest.mark.parametrize("served", [(sys.executable, str(SCRIPT))], indirect=True)
def test_the_script_serves_every_logged_map(served: TensorBoard, many_maps_run: Path):
    logged = logged_steps(many_maps_run)
    assert len(logged) > TENSORBOARD_DEFAULT_IMAGES, logged
    assert served_steps(served) == logged


@pytest.mark.parametrize("served", [(sys.executable, "-m", "tensorboard.main")], indirect=True)
def test_plain_tensorboard_drops_maps_which_is_why_the_script_exists(served: TensorBoard, many_maps_run: Path):
    served_by_default = served_steps(served)
    assert len(served_by_default) == TENSORBOARD_DEFAULT_IMAGES < len(logged_steps(many_maps_run))


@pytest.mark.parametrize("args", [["nowhere"], ["--logdir=nowhere"], ["outputs", "--logdir=outputs"]])
def test_a_bad_logdir_is_one_line(tmp_path: Path, args: list[str]):
    proc = run_script(SCRIPT, *[arg.replace("nowhere", str(tmp_path / "nowhere")) for arg in args], cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: logdir"), proc.stderr


def sweep_at(outputs: Path, name: str, mtime: float) -> Path:
    """A sweep dir as train.py -m leaves it: Hydra's multirun.yaml (changed at ``mtime``) and a job dir."""
    import os

    sweep = outputs / "multirun" / name
    (sweep / "0" / ".hydra").mkdir(parents=True)
    (sweep / "multirun.yaml").write_text("hydra: {}\n")
    os.utime(sweep / "multirun.yaml", (mtime, mtime))
    return sweep


def test_without_a_logdir_the_newest_sweep_is_opened_and_the_line_says_how_to_open_everything(tmp_path: Path):
    import runpy

    script = runpy.run_path(str(SCRIPT))  # its functions, without starting TensorBoard
    outputs = tmp_path / "outputs"
    (outputs / "runs" / "2026-11-24" / "10-00-00" / ".hydra").mkdir(parents=True)
    assert script["default_logdir"](outputs) == (outputs, f"TensorBoard on every run under {outputs} (no sweep there)")
    sweep_at(outputs, "2026-11-23/09-00-00", 1_000)
    newest = sweep_at(outputs, "2026-11-22/09-00-00", 2_000)  # resumed last: its record changed last
    logdir, line = script["default_logdir"](outputs)
    assert logdir == newest
    assert line == (f"TensorBoard on the newest sweep, {newest} (its HParams table compares its jobs); every run and "
                    f"sweep: {script_command('start_tensorboard.py')} {outputs}")


# ---------------------------------------------------------------------------------------------- the attention tab

TAB_FLAG = "--samples_per_plugin=attention_lab=0"  # what the tab's header and --help advise
TAB_STEPS = 150  # more than either loader keeps of a tensor tag by default (100 and 10)
PLAIN = (sys.executable, "-m", "tensorboard.main")


@pytest.fixture(scope="module")
def many_records_run(tmp_path_factory) -> Path:
    """A run whose event file holds the tab's record at more steps than TensorBoard keeps by default."""
    run_dir = tmp_path_factory.mktemp("many_records") / "run"
    write_run(run_dir, steps=list(range(0, 10 * TAB_STEPS, 10)), words=["Life", "is", "short"])
    return run_dir


def tab_steps(server: TensorBoard) -> list[int]:
    """The steps the tab's maps route offers (its step slider)."""
    return server.get_json("/data/plugin/attention_lab/maps", run="tensorboard/version_0")["steps"]


# One row per rule: TensorBoard's default keeps a sample of the tab's steps; the flag keeps every step with either
# loader; the script passes the flag (whatever the loader: it does not look at --load_fast).
@pytest.mark.parametrize(("launcher", "flags", "every_step"), [
    (PLAIN, ["--load_fast=true"], False),
    (PLAIN, ["--load_fast=true", TAB_FLAG], True),
    (PLAIN, ["--load_fast=false", TAB_FLAG], True),
    ((sys.executable, str(SCRIPT)), ["--load_fast=true"], True),
], ids=["default", "flag", "flag-python-loader", "script"])
def test_attention_lab_0_keeps_every_step_of_the_tab(many_records_run: Path, tmp_path: Path, launcher, flags,
                                                     every_step: bool):
    """attention_lab=0 is "all" for the tab with either loader (the tab asks for every step kept); without it
    TensorBoard keeps a sample. Served once the last step is (a loader keeps the newest step of a tag)."""
    logged = list(range(0, 10 * TAB_STEPS, 10))
    with serve(many_records_run, tmp_path / "server.log", lambda server: logged[-1] in tab_steps(server), *flags,
               launcher=launcher) as server:
        served = tab_steps(server)
    assert (served == logged) if every_step else (len(served) < len(logged) and set(served) < set(logged)), served


def test_the_help_gives_the_tabs_advice():
    """--help and the tab's header (tests/browser/test_tensorboard_tab_browser.py) name the same flag, and say what it does."""
    help_text = " ".join(run_script(SCRIPT, "--help", check=True).stdout.split())
    assert TAB_FLAG.split("=", 1)[1] in help_text  # the script's own flag
    assert "attention_lab=0 keeps every step of the attention tab with either loader" in help_text
