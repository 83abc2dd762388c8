"""The attention tab's path graph (the path patching a run logs at its final validation, as the circuits route sends
its strongest paths) and the clamped steps the maps route names for the step slider, from a run's saved config.
The end values are written here as callbacks/validation_pass.write_end_values writes them; the expected answers are
written out by hand."""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pytest
import yaml
from test_tensorboard_tab import client_for, get

from tab_runs import write_run

WORDS = ["Life", "is", "short"]
P = "path_patching/logit_diff"
# At the final validation (step 100), as a 2-layer x 3-head run logs them, and a few it never would.
PATHS = {
    f"{P}/layer0/head1/layer1/head2/k": 0.61,
    f"{P}/layer0/head1/layer1/head2/q": 0.07,
    f"{P}/layer0/head1/layer1/head2/v": -0.33,
    f"{P}/layer0/head0/layer1/head2/k": 0.25,
    f"{P}/layer0/head2/layer1/head0/v": 0.125,
    f"{P}/layer1/head2/logits": 0.8,
    f"{P}/layer1/head0/logits": -0.1,
    f"{P}/layer0/head1/logits": 0.0625,
    f"{P}/layer0/head0/logits": 0.06,
    f"{P}/layer0/head2/logits": 0.03,  # below the threshold (0.05): not drawn
    f"{P}/layer0/head0/layer1/head1/q": 0.01,  # below it too
    f"{P}/layer0/head0/layer1/head0/q": math.nan,  # not a number: not drawn
    f"{P}/layer1/head0/layer0/head1/k": 0.9,  # to an earlier layer: no such path
    f"{P}/layer0/head1/layer0/head2/k": 0.9,  # within one layer: none either
    f"{P}/layer70/head0/logits": 0.95,  # beyond the tab's 64 layers: not read
    f"{P}/layer0/head1/layer1/head2/x": 0.95,  # not an input of a head
}
# The 8 largest |value| of at least 0.05, largest first: what the graph draws.
STRONGEST = [([1, 2], None, "logits", 0.8), ([0, 1], [1, 2], "k", 0.61), ([0, 1], [1, 2], "v", -0.33),
             ([0, 0], [1, 2], "k", 0.25), ([0, 2], [1, 0], "v", 0.125), ([1, 0], None, "logits", -0.1),
             ([0, 1], [1, 2], "q", 0.07), ([0, 1], None, "logits", 0.0625)]


def write_end_values(log_dir: Path, values: dict[str, float], step: int) -> None:
    """As callbacks/validation_pass.write_end_values: an event file of its own, ``.ablation``, in the run's
    TensorBoard dir."""
    import time

    from tensorboard.compat.proto import event_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    from attention_lab.records.probe_summary import end_values_summary

    writer = EventFileWriter(str(log_dir), filename_suffix=".ablation")
    try:
        writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=end_values_summary(values)))
    finally:
        writer.close()


def write_config(run_dir: Path, data: dict | str) -> None:
    from attention_lab.records.files import SAVED_CONFIG

    (run_dir / SAVED_CONFIG).parent.mkdir(parents=True, exist_ok=True)
    (run_dir / SAVED_CONFIG).write_text(data if isinstance(data, str) else yaml.safe_dump(data))


def write_paths_run(run_dir: Path) -> None:
    """A run with maps at 50 and 100, its path patching measured at the end (100), clamping layer0's heads from 50."""
    write_run(run_dir, steps=[50, 100], words=WORDS, name="")
    write_end_values(run_dir / "tensorboard", PATHS, 100)
    write_config(run_dir, {"clamp": ["layer0/head*"], "clamp_from": 50, "clamp_until": None})


@pytest.fixture(scope="module")
def client(tmp_path_factory):
    root = tmp_path_factory.mktemp("paths_logdir")
    write_paths_run(root / "run")
    write_run(root / "old", steps=[50], words=WORDS, name="")  # no config: trained before the knobs
    return client_for(root)


def test_the_strongest_paths_are_drawn_from_the_final_step(client):
    graph = get(client, "circuits", run="run/tensorboard", step="100").get_json()["paths"]
    assert [(e["sender"], e["receiver"], e["kind"], pytest.approx(e["value"])) for e in graph["edges"]] == STRONGEST
    assert (graph["step"], graph["logged_step"], graph["top"], graph["threshold"]) == (100, 100, 8, 0.05)
    assert graph["paths"] == 12 and graph["layers"] == 2  # the paths read: every one of the run's own two layers
    assert get(client, "circuits", run="run/tensorboard", step="50").get_json()["paths"] is None  # not measured yet
    assert get(client, "circuits", run="old/tensorboard").get_json()["paths"] is None


def test_the_paths_within_the_runs_config_only(tmp_path):
    """A config of 2 layers x 2 heads: the paths of head 2 are not read."""
    write_run(tmp_path / "run", steps=[100], words=WORDS, name="")
    write_end_values(tmp_path / "run" / "tensorboard", PATHS, 100)
    write_config(tmp_path / "run", {"model": {"layers": 2, "num_heads": 2}})
    graph = get(client_for(tmp_path), "circuits", run="run/tensorboard").get_json()["paths"]
    assert [(e["sender"], e["receiver"], e["kind"]) for e in graph["edges"]] == [
        ([1, 0], None, "logits"), ([0, 1], None, "logits"), ([0, 0], None, "logits")]
    assert graph["paths"] == 5


def test_the_maps_name_the_clamped_steps(client):
    maps = get(client, "maps", run="run/tensorboard").get_json()
    assert maps["clamp"] == {"heads": ["layer0/head*"], "from": 50, "until": None}
    assert get(client, "maps", run="run/tensorboard", step="50").get_json()["clamp"] == maps["clamp"]
    assert get(client, "maps", run="old/tensorboard").get_json()["clamp"] is None


@pytest.mark.parametrize(("knobs", "clamp"), [
    ({"clamp": ["layer1/head0", "layer0/head*"], "clamp_until": 60}, {"heads": ["layer1/head0", "layer0/head*"],
                                                                       "from": 0, "until": 60}),
    ({"clamp": []}, None),  # nothing clamped
    ({"clamp": ["layer0/head0"], "clamp_from": 40, "clamp_until": 40}, None),  # no step
    ({"clamp_from": 10}, None),  # no clamp knob: a run from before it
])
def test_the_clamp_knobs_as_a_run_saves_them(tmp_path, caplog, knobs, clamp):
    write_run(tmp_path / "run", steps=[50], words=WORDS, name="")
    write_config(tmp_path / "run", {"layers": 2, **knobs})
    with caplog.at_level(logging.WARNING):
        assert get(client_for(tmp_path), "maps", run="run/tensorboard").get_json()["clamp"] == clamp
    assert not [r for r in caplog.records if "clamped" in r.getMessage()]


@pytest.mark.parametrize(("knobs", "problem"), [
    ({"clamp": "layer0/head*"}, "clamp is not a list of layer/head patterns"),
    ({"clamp": [0, 1]}, "clamp is not a list of layer/head patterns"),
    ({"clamp": [f"layer0/head{h}" for h in range(65)]}, "clamp lists 65 patterns, more than the 64 the tab shows"),
    ({"clamp": ["layer0/head" + "1" * 60]}, "clamp has a pattern longer than the 64 characters the tab shows"),
    ({"clamp": ["layer0/head0"], "clamp_from": "10"}, "clamp_from is '10', not a step from 0 to 9007199254740991"),
    ({"clamp": ["layer0/head0"], "clamp_until": True}, "clamp_until is 'True', not a step from 0 to 9007199254740991"),
    ({"clamp": ["layer0/head0"], "clamp_from": -1}, "clamp_from is '-1', not a step from 0 to 9007199254740991"),
    ({"clamp": ["layer0/head0"], "clamp_until": 2**60}, "clamp_until is '1152921504606846976', not a step from 0"),
])
def test_clamp_knobs_the_lab_never_writes_mark_nothing_and_are_warned_once(tmp_path, caplog, knobs, problem):
    from attention_lab.records.files import SAVED_CONFIG

    write_run(tmp_path / "run", steps=[50], words=WORDS, name="")
    write_config(tmp_path / "run", {"layers": 2, **knobs})
    client = client_for(tmp_path)
    with caplog.at_level(logging.WARNING):
        for _ in range(3):
            response = get(client, "maps", run="run/tensorboard")
            assert response.status_code == 200 and response.get_json()["clamp"] is None
    warned = [r.getMessage() for r in caplog.records if "clamped" in r.getMessage()]
    assert len(warned) == 1 and problem in warned[0] and str(tmp_path / "run" / SAVED_CONFIG) in warned[0], warned
    assert "\n" not in warned[0]


def test_a_snapshot_holds_the_paths_and_the_clamped_steps(tmp_path):
    from attention_lab.tensorboard_plugin.snapshot import read_runs

    write_paths_run(tmp_path / "run")
    (run,) = read_runs(tmp_path / "run")
    assert run["clamp"] == {"heads": ["layer0/head*"], "from": 50, "until": None}
    last = yaml.safe_load(run["circuits"]["100"].text)  # JSON is YAML
    assert [(e["sender"], e["receiver"], e["kind"]) for e in last["paths"]["edges"]] == [s[:3] for s in STRONGEST]
    assert yaml.safe_load(run["circuits"]["50"].text)["paths"] is None
