"""scripts/start_tensorboard.py: TensorBoard over a run serves every step the run logged, where plain `tensorboard`
drops all but 10 of a tag's images; a logdir that is not a directory is one line, before anything starts."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import IMAGES, EventAccumulator

from attention_lab.run.files import tensorboard_dir
from conftest import ROOT, run_script, run_train
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
                    f"sweep: python scripts/start_tensorboard.py {outputs}")
