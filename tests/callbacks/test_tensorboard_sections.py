"""What TensorBoard shows first: a run's learning curves. Values measured once, at the end (the head ablations),
are no one-point scalar charts: they are in metrics.json, the heatmaps and the attention tab. The probe's attention
is logged at the steps of callbacks/probe_logging.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tensorboard import context
from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from attention_lab.analysis.tags import HeadMetric
from attention_lab.callbacks.probe_logging import logged_steps
from attention_lab.records.files import tensorboard_dir
from attention_lab.records.probe_summary import PROBE_TAG
from attention_lab.records.run_names import PLUGIN_NAME
from attention_lab.tensorboard_logger import LEARNING_CURVES, SECTION, tensorboard_tag
from attention_lab.tensorboard_plugin.declared import DeclaredSizes
from attention_lab.tensorboard_plugin.run_data import Source
from conftest import run_train

MAX_STEPS, EVERY = 24, 1  # the probe at steps 1..20, then every 2 steps


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    """A tiny default run (attention maps, head scores and both ablations on), validated at steps 12 and 24."""
    run_dir = tmp_path_factory.mktemp("sections") / "run"
    run_train(run_dir, f"max_steps={MAX_STEPS}", "task.train_size=256", "task.val_size=64",
              "trainer.val_check_interval=12", "trainer.log_every_n_steps=3", f"log_attention_every_n_steps={EVERY}",
              "~callbacks.early_stopping")
    return run_dir


@pytest.fixture(scope="module")
def events(run_dir: Path) -> EventAccumulator:
    return EventAccumulator(str(tensorboard_dir(run_dir)), size_guidance={"scalars": 0, "images": 0,
                                                                          "tensors": 0}).Reload()


def test_the_first_section_is_loss_and_accuracy(events):
    tags = events.Tags()
    cards = tags["scalars"] + tags["images"]  # what the Scalars and Time Series dashboards list
    # TensorBoard orders the cards by compareTagNames: character codes, except that digits, "/" and "_" come first.
    # No tag starts with one of those, so Python's order of the first characters is TensorBoard's.
    assert not [tag for tag in cards if tag[0].isdigit() or tag[0] in "/_"]
    first_section = sorted(cards)[0].split("/", 1)[0]
    assert first_section == SECTION
    assert {tensorboard_tag(f"{split}/{metric}") for split in ("train", "val")
            for metric in ("loss", "seq_acc", "token_acc")} <= set(cards)
    # every learning curve is in that section, and nothing else is
    assert {tag for tag in cards if tag.startswith(f"{SECTION}/")} == {
        tensorboard_tag(name) for name in LEARNING_CURVES if tensorboard_tag(name) in cards}


def test_no_one_point_charts_of_end_only_values(events, run_dir: Path):
    from attention_lab.callbacks.head_score_maps import image_tag

    per_head = {tag: len(events.Scalars(tag)) for tag in events.Tags()["scalars"] if HeadMetric.parse(tag)}
    assert per_head and all(points > 1 for points in per_head.values()), per_head  # head scores: every validation
    assert not [tag for tag in per_head if tag.startswith("ablation/")]  # measured once, at the end
    metrics = json.loads((run_dir / "metrics.json").read_text())
    ablations = {key for key in metrics if key.startswith("ablation/")}
    assert len(ablations) == 2 * 2 * 2 * (4 + 1)  # zero/mean x loss/token_acc x 2 layers x (4 heads + the layer)
    assert {image_tag(f"ablation/{how}/{metric}") for how in ("zero", "mean") for metric in ("loss", "token_acc")} \
        <= set(events.Tags()["images"])  # their heatmaps


def test_the_images_dashboard_opens_on_the_attention_maps(events):
    """The Images dashboard lists its sections by the tags' first part (TensorBoard's order, as above) and opens the
    first two: the probe's attention maps come first, the layers x heads heatmaps after them."""
    sections = list(dict.fromkeys(tag.split("/", 1)[0] for tag in sorted(events.Tags()["images"])))
    assert sections[0] == "attention" and "ablation" not in sections, sections


def test_the_attention_tab_shows_the_ablations(run_dir: Path):
    logdir = str(run_dir / "tensorboard")  # as TensorBoard reads it: the run's events below, by its name
    multiplexer = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={PLUGIN_NAME: 0})
    multiplexer.AddRunsFromDirectory(logdir)
    multiplexer.Reload()
    source = Source(data_provider.MultiplexerDataProvider(multiplexer, logdir), context.RequestContext(), "",
                    DeclaredSizes(logdir))
    (run,) = [r["run"] for r in source.runs()]
    metrics = json.loads((run_dir / "metrics.json").read_text())
    grids = {grid["family"]: grid for grid in source.scores(run, MAX_STEPS)}
    loss = grids["ablation/zero/loss"]
    assert loss["step"] == MAX_STEPS
    assert loss["cells"][1][2] == pytest.approx(metrics["ablation/zero/loss/layer1/head2"], abs=1e-6)
    assert loss["whole_layer"][0] == pytest.approx(metrics["ablation/zero/loss/layer0/all"], abs=1e-6)


def test_the_probe_is_logged_at_the_scheduled_steps(events):
    steps = [event.step for event in events.Tensors(PROBE_TAG)]
    assert steps == logged_steps(MAX_STEPS, EVERY) == [*range(1, 21), 22, 24]  # 24: the end of training too
