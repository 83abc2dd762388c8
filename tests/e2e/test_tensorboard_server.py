"""A real TensorBoard server over a finished run serves its scalars, attention images and hparams:
started as `python -m tensorboard.main --logdir <run dir>` on 127.0.0.1, read through its HTTP data API."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from attention_lab.analysis.tags import ATTRIBUTION, ENTROPY, FAMILIES, PATCHING
from attention_lab.tensorboard_logger import tensorboard_tag
from conftest import ROOT, SOLVED_RUN_MAX_STEPS, script_env
from tb_server import TensorBoard, serve

PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def tensorboard(solved_run: Path, tmp_path_factory) -> Iterator[TensorBoard]:
    with serve(solved_run, tmp_path_factory.mktemp("tensorboard") / "server.log",
               lambda server: bool(server.get_json("/data/plugin/scalars/tags"))) as server:
        yield server


# The one run under the logdir: the run dir's tensorboard/ folder, named by the run's overrides (conftest's
# solved_run sets max_steps; the other overrides it gives only change what is logged, so they are not in the name).
RUN = f"tensorboard/max_steps={SOLVED_RUN_MAX_STEPS}"


def run_of(tags_by_run: dict) -> dict:
    assert list(tags_by_run) == [RUN], list(tags_by_run)
    return tags_by_run[RUN]


def test_server_serves_the_scalars(tensorboard: TensorBoard):
    tags = run_of(tensorboard.get_json("/data/plugin/scalars/tags"))
    curves = {tensorboard_tag(f"{split}/{metric}") for split in ("train", "val")
              for metric in ("loss", "token_acc", "seq_acc")}
    expected = curves | {"lr-AdamW", "attention_entropy/layer0/head0", "attention_entropy/layer1/head3"}
    assert expected <= set(tags)
    points = tensorboard.get_json("/data/plugin/scalars/scalars", run=RUN, tag=tensorboard_tag("val/seq_acc"))
    assert points and points[-1][2] >= 0.99  # [wall_time, step, value]


def test_server_serves_the_attention_images(tensorboard: TensorBoard):
    tags = run_of(tensorboard.get_json("/data/plugin/images/tags"))
    assert {f"attention/layer{layer}/head{head}" for layer in range(2) for head in range(4)} <= set(tags)
    images = tensorboard.get_json("/data/plugin/images/images", run=RUN, tag="attention/layer1/head0")
    assert len(images) == 1  # the final model's; the attention tab has every logged step
    assert tensorboard.get("/data/plugin/images/individualImage?" + images[-1]["query"]).startswith(PNG)


def test_server_serves_the_hparams(tensorboard: TensorBoard):
    experiment = tensorboard.post_json("/data/plugin/hparams/experiment", {"experimentName": ""})
    hparams = {info["name"] for info in experiment["hparamInfos"]}
    assert {"model", "heads", "d_model", "layers", "mask", "task", "lr"} <= hparams
    metrics = {info["name"]["tag"] for info in experiment["metricInfos"]}
    assert {"hp/val_seq_acc", "hp/val_token_acc", "hp/val_loss"} <= metrics


def test_server_lists_the_attention_tab_and_serves_its_maps(tensorboard: TensorBoard):
    listing = tensorboard.get_json("/data/plugins_listing")
    assert listing["attention_lab"]["enabled"] and listing["attention_lab"]["tab_name"] == "attention"
    runs = tensorboard.get_json("/data/plugin/attention_lab/runs")["runs"]
    # the run by its readable name (the overrides it was trained with) and the time of its first event
    assert [{key: value for key, value in r.items() if key != "start_time"} for r in runs] == [
        {"run": RUN, "label": f"max_steps={SOLVED_RUN_MAX_STEPS}", "has_maps": True, "message": None}]
    assert 0 < runs[0]["start_time"] <= time.time()
    data = tensorboard.get_json("/data/plugin/attention_lab/maps", run=RUN)
    # every log_attention_every_n_steps (50) and at the end; TensorBoard keeps 10 of a tag's steps by default
    assert data["steps"][0] == 50 and all(s % 50 == 0 for s in data["steps"][:-1]) and 2 <= len(data["steps"]) <= 10
    assert len(data["weights"]) == 2 and len(data["weights"][0]) == 4  # layers x heads
    grids = tensorboard.get_json("/data/plugin/attention_lab/scores", run=RUN, step=str(data["step"]))["grids"]
    # A default run logs every head score and both ablations of the final validation (attention_lab.analysis.tags);
    # its task (reverse) has no corruption to patch (nor to attribute).
    assert {g["family"] for g in grids} == {f for f in FAMILIES if f not in (ENTROPY, PATCHING, ATTRIBUTION)}


def test_the_tab_loads_without_torch():
    """TensorBoard loads the tab's plugin at start-up, whatever tab the user opens: torch waits for a request that
    runs a model (a sentence, a checkpoint's circuits)."""
    code = "import sys, attention_lab.tensorboard_plugin.plugin; print('torch imported:', 'torch' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=script_env(), cwd=ROOT,
                          timeout=60)
    assert proc.returncode == 0 and "torch imported: False" in proc.stdout, proc.stdout + proc.stderr
