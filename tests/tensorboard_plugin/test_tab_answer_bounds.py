"""What an event file can make the attention tab's scores and circuits routes, and scripts/snapshot.py, compute and
send: tags beyond the layers, heads and indices of the run's own config are not read, one answer holds at most
MAX_ANSWER_CELLS numbers, a snapshot at most MAX_SNAPSHOT_BYTES of records (and its probe's weights are counted
before their arrays are built), and a MemoryError in a review script is one line. Every event file here is written
by the test with TensorBoard's writers, as a crafted run dir would hold it."""

from __future__ import annotations

import importlib
import importlib.util
import sys
import time
import tracemalloc
import weakref
from pathlib import Path

import pytest
from test_tensorboard_tab import client_for, get
from test_tensorboard_tab_bounds import one_value, strict_json

from conftest import ROOT, compose_config
from tab_runs import write_run

MiB = 1 << 20
FAR = 12  # layers of the crafted composition tags: 3 kinds x 66 pairs of layers, each a 64 x 64 grid in one tag


def save_config(run_dir: Path, overrides: list[str]) -> None:
    """The run's composed config, saved as Hydra saves it (unresolved: ``model.layers: ${layers}``)."""
    from omegaconf import OmegaConf

    from attention_lab.records.files import SAVED_CONFIG

    (run_dir / SAVED_CONFIG).parent.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(compose_config(overrides), run_dir / SAVED_CONFIG)


# In the declared 2 layers x 2 heads and 4 indices: the values the answers must show, and nothing else.
INSIDE = {"composition/q/layer0/head1/layer1/head0": [(9, 0.25)], "circuit/copying/layer1/head1": [(9, 0.5)],
          "patching/logit_diff/layer0/head1": [(9, 0.75)], "val/loss_by_index/3": [(9, 1.5)],
          "head_score/induction/layer1/head0": [(9, 0.125)]}


def far_tags(steps: int = 1) -> dict[str, list[tuple[int, float]]]:
    """Tags of layers, heads and indices no small model has: one value each widens a grid to head 63, index 511."""
    far = {f"composition/{kind}/layer{a}/head63/layer{b}/head63": [(9, 0.5)]
           for kind in "qkv" for a in range(FAR) for b in range(a + 1, FAR)}
    far.update({"circuit/copying/layer63/head63": [(9, 0.5)], "patching/logit_diff/layer40/head63": [(9, 0.5)],
                "val/loss_by_index/511": [(step, 1.0) for step in range(9, 9 + steps)],
                **{f"head_score/{kind}/layer63/head63": [(9, 0.5)] for kind in ("induction", "previous_token")}})
    return far


def counting_client(logdir: Path):
    """The plugin's WSGI app over ``logdir``, with the tags it asks the provider to read."""
    from tensorboard.backend import application
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from werkzeug import test as werkzeug_test
    from werkzeug import wrappers

    from attention_lab.tensorboard_plugin.plugin import AttentionPlugin

    asked: list[str] = []

    class Counting(data_provider.MultiplexerDataProvider):
        def read_scalars(self, ctx=None, *, run_tag_filter=None, **kwargs):
            asked.extend(run_tag_filter.tags or ["<every tag>"])
            return super().read_scalars(ctx, run_tag_filter=run_tag_filter, **kwargs)

    multiplexer = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={"attention_lab": 0})
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    context = base_plugin.TBContext(logdir=str(logdir), data_provider=Counting(multiplexer, str(logdir)))
    return werkzeug_test.Client(application.TensorBoardWSGI([AttentionPlugin(context)]), wrappers.Response), asked


def measured(call):
    """``call()``, its seconds and its peak of Python allocations (numpy's arrays included)."""
    tracemalloc.start()
    started = time.perf_counter()
    try:
        result = call()
        return result, time.perf_counter() - started, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_tags_beyond_the_runs_config_are_not_read(tmp_path):
    """The run's config declares 2 layers x 2 heads and a context of 4: the circuits and scores routes show
    exactly the tags inside them, and ask the provider for no other."""
    write_run(tmp_path / "run", steps=[10], words=["Life"], layers=1, heads=1, scalars={**INSIDE, **far_tags()},
              name="")
    save_config(tmp_path / "run", ["layers=2", "heads=2", "model.context_length=4"])
    client, asked = counting_client(tmp_path)
    response, seconds, peak = measured(lambda: get(client, "circuits", run="run/tensorboard", step="10"))
    assert response.status_code == 200 and len(response.get_data()) < 4000, len(response.get_data())
    data = strict_json(response)
    assert [(g["kind"], g["writer_layer"], g["reader_layer"], g["cells"]) for g in data["composition"]] == [
        ("q", 0, 1, [[None], [0.25]])]
    assert data["copying"]["cells"] == [[None, None], [None, 0.5]]
    assert data["patching"]["cells"] == [[None, 0.75]]
    assert data["loss_by_index"]["values"] == [[None, None, None, 1.5]]
    assert sorted(asked) == sorted(tag for tag in INSIDE if not tag.startswith("head_score/"))
    assert seconds < 10 and peak < 20 * MiB
    asked.clear()
    scores = strict_json(get(client, "scores", run="run/tensorboard", step="10"))
    assert [(g["family"], g["cells"]) for g in scores["grids"]] == [("head_score/induction", [[None], [0.125]]),
                                                                    ("patching/logit_diff", [[None, 0.75]])]
    assert sorted(asked) == ["head_score/induction/layer1/head0", "patching/logit_diff/layer0/head1"]


def test_an_answer_beyond_the_cell_bound_is_one_line(tmp_path):
    """Without a config, the tab's limits (64 layers x 64 heads) bound the tags: the composition tags of 12 layers
    at head 63 would be 198 grids of 64 x 64 (811,008 numbers, some 5 MB of JSON) at every request."""
    write_run(tmp_path / "crafted", steps=[10], words=["Life"], layers=1, heads=1, scalars=far_tags(), name="")
    client = client_for(tmp_path)
    for _ in range(2):
        response, seconds, peak = measured(lambda: get(client, "circuits", run="crafted/tensorboard", step="10"))
        assert response.status_code == 404 and len(response.get_data()) < 2000
        from attention_lab.tensorboard_plugin.limits import MAX_ANSWER_CELLS

        error = strict_json(response)["error"]
        assert "\n" not in error and "Traceback" not in error
        assert f"more than the {MAX_ANSWER_CELLS} that one answer of the attention tab holds" in error
        assert "from the attention tab's limits" in error
        assert seconds < 10 and peak < 40 * MiB


def test_loss_by_index_over_many_steps_is_bounded(tmp_path):
    """One index tag at the tab's last index, logged at 600 steps: a heatmap of 600 x 512 cells without a config
    (refused in one line), one of 600 x 4 with a config of a context of 4 (the tag is not read)."""
    write_run(tmp_path / "bare", steps=[10], words=["Life"], layers=1, heads=1, scalars=far_tags(steps=600), name="")
    write_run(tmp_path / "declared", steps=[10], words=["Life"], layers=1, heads=1,
              scalars={**INSIDE, "val/loss_by_index/511": far_tags(steps=600)["val/loss_by_index/511"]}, name="")
    save_config(tmp_path / "declared", ["layers=2", "heads=2", "model.context_length=4"])
    client = client_for(tmp_path)
    refused = get(client, "circuits", run="bare/tensorboard")
    assert refused.status_code == 404 and "one answer of the attention tab holds" in strict_json(refused)["error"]
    shown = get(client, "circuits", run="declared/tensorboard")
    assert shown.status_code == 200 and strict_json(shown)["loss_by_index"]["steps"] == [9]


def test_the_config_is_read_once_and_a_changed_one_again(tmp_path, caplog):
    """An unreadable config (here larger than the bounded reader's 1 MiB) is read and warned about once, however
    many requests of either route ask; a rewritten config is read again."""
    from attention_lab.records.files import SAVED_CONFIG

    write_run(tmp_path / "run", steps=[10], words=["Life"], layers=1, heads=1, scalars=INSIDE, name="")
    config = tmp_path / "run" / SAVED_CONFIG
    config.parent.mkdir(parents=True)
    config.write_text("# padding\n" * (MiB // 10 + 1))
    client = client_for(tmp_path)
    for _ in range(3):
        assert get(client, "circuits", run="run/tensorboard").status_code == 200
        assert get(client, "scores", run="run/tensorboard").status_code == 200
    unreadable = [r for r in caplog.records if "is unreadable" in r.getMessage()]
    assert len(unreadable) == 1 and "larger than 1 MiB" in unreadable[0].getMessage()
    save_config(tmp_path / "run", ["layers=1", "heads=1"])
    assert strict_json(get(client, "circuits", run="run/tensorboard"))["copying"] is None  # layer 1 is not read


def test_a_task_the_lab_never_writes_is_no_task(tmp_path):
    """The head to open on comes from the config's task: options of a type the lab never writes are no task (the
    scores still answer), not a failed request."""
    import yaml

    from attention_lab.records.files import SAVED_CONFIG

    write_run(tmp_path / "run", steps=[10], words=["Life"], layers=1, heads=1, scalars=INSIDE, name="")
    (tmp_path / "run" / SAVED_CONFIG).parent.mkdir(parents=True)
    (tmp_path / "run" / SAVED_CONFIG).write_text(yaml.safe_dump({"task": {"name": "copy", "options": [1]}}))
    response = get(client_for(tmp_path), "scores", run="run/tensorboard", step="10")
    assert response.status_code == 200 and strict_json(response)["focus"] is None


@pytest.mark.parametrize(("overrides", "sizes"), [(["layers=3", "heads=2"], (3, 2, 16)),
                                                  (["model=self", "model.context_length=40"], (2, 4, 40)),
                                                  (["mixers=[gated_deltanet,multihead,multihead]"], (3, 4, 16))])
def test_the_sizes_of_a_saved_config(tmp_path, overrides, sizes):
    """As Hydra saves the lab's config: the model's sizes are interpolations of the top-level knobs (a single-head
    variant's heads are bounded by the heads knob, which is more)."""
    from attention_lab.tensorboard_plugin.run_config import RunConfigs

    save_config(tmp_path / "run", overrides)
    found = RunConfigs().of(tmp_path, tmp_path / "run").sizes
    assert (found.layers, found.heads, found.indices) == sizes


# ------------------------------------------------------------------------------------------------ the snapshot

def test_a_snapshot_is_refused_when_its_records_pass_the_byte_bound(tmp_path, monkeypatch):
    """Score tags of layer 63 and head 63 make each step's grid 64 x 64 (some 25 KB of JSON): at 300 steps the
    page would hold some 8 MB. The bound (here 1 MiB, to keep the test short) refuses it after a few dozen steps'
    parts, before the page is built; what remains is TensorBoard's reading of the file (a read buffer of 16 MiB)."""
    import attention_lab.tensorboard_plugin.snapshot as module
    from attention_lab.errors import ReviewError

    path = tmp_path / "runs" / "2026-11-26" / "10-00-00"
    write_run(path, steps=list(range(0, 3000, 10)), words=["Life"], layers=1, heads=1, name="",
              scalars={f"head_score/induction/layer63/head{head}": [(0, 0.5)] for head in (0, 63)})
    assert sum(f.stat().st_size for f in (path / "tensorboard").iterdir()) < 128 * 1024
    monkeypatch.setattr(module, "MAX_SNAPSHOT_BYTES", MiB, raising=False)
    (_, error), seconds, peak = measured(lambda: refused(lambda: module.snapshot(path, out=str(tmp_path / "page.html"))))
    assert isinstance(error, ReviewError), error
    assert "\n" not in str(error) and f"would embed more than {MiB} bytes of records, the most a snapshot holds" in str(error)
    assert not (tmp_path / "page.html").exists()
    assert seconds < 20 and peak < 24 * MiB


def test_the_probes_weights_are_counted_before_their_arrays(tmp_path):
    """100 probe records of a few hundred bytes each that declare 512 x 512 weights (one value fills any shape): 26
    million weights, 52 MB of arrays had they been built. Refused from the declared sizes: what remains is
    TensorBoard's reading of the file (a read buffer of 16 MiB)."""
    from attention_lab.errors import ReviewError
    from attention_lab.tensorboard_plugin.snapshot import MAX_SNAPSHOT_WEIGHTS, snapshot

    path = tmp_path / "runs" / "2026-11-26" / "10-00-00"
    write_probes(path, ["w"], one_value((1, 1, 512, 512)), steps=range(100))
    (_, error), _, peak = measured(lambda: refused(lambda: snapshot(path, out=str(tmp_path / "page.html"))))
    assert isinstance(error, ReviewError)
    assert (f"the run logged {100 * 512 * 512} attention weights over 100 steps, more than the {MAX_SNAPSHOT_WEIGHTS}"
            in str(error))
    assert peak < 24 * MiB


def refused(call):
    try:
        return call(), None
    except Exception as err:  # noqa: BLE001 - the caller checks which
        return None, err


def write_probes(run_dir: Path, words: list[str], tensor, steps) -> None:
    """Probe records holding ``tensor`` at each step, written with TensorBoard's public event writer."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    from attention_lab.records.probe_summary import PROBE_TAG, WordLayout, summary_metadata

    writer = EventFileWriter(str(run_dir / "tensorboard"), filename_suffix=".attention")
    for step in steps:
        value = summary_pb2.Summary.Value(tag=PROBE_TAG, metadata=summary_metadata(WordLayout(words, words)),
                                          tensor=tensor)
        writer.add_event(event_pb2.Event(step=step, wall_time=1.0, summary=summary_pb2.Summary(value=[value])))
    writer.close()


# ------------------------------------------------------------------------------------------------ MemoryError

def script_main(name: str):
    spec = importlib.util.spec_from_file_location(f"{name}_script", ROOT / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


WORK = {"snapshot": ("attention_lab.tensorboard_plugin.snapshot", "snapshot"), "visualize": ("attention_lab.review.visualize", "visualize"),
        "compare": ("attention_lab.review.sweep", "collect_sweep"), "plot_sweep": ("attention_lab.review.sweep", "collect_sweep")}


class Held:
    """Something the failed work had built."""


class Stderr:
    """sys.stderr that notes, at each write, whether what ``built()`` names (a weak reference) was freed."""

    def __init__(self, built) -> None:
        self.built, self.lines, self.freed = built, [], []

    def write(self, text: str) -> int:
        self.lines.append(text)
        self.freed.append(self.built() is None)
        return len(text)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("script", list(WORK))
def test_a_memory_error_in_a_review_script_is_one_line(tmp_path, monkeypatch, script):
    """The script's work builds something and runs out of memory: one line, written after what it built is freed
    (the traceback's frames held it)."""
    module_name, function = WORK[script]
    refs = []

    def exhausted(*args, **kwargs):
        built = Held()
        refs.append(weakref.ref(built))
        raise MemoryError

    monkeypatch.setattr(importlib.import_module(module_name), function, exhausted)
    main = script_main(script)
    stderr = Stderr(lambda: refs[0]() if refs else None)
    monkeypatch.setattr(sys, "stderr", stderr)
    assert main([str(tmp_path / "records")]) == 1
    text = "".join(stderr.lines)
    assert text.startswith("error: ") and text.count("\n") == 1 and "Traceback" not in text, text
    assert "ran out of memory" in text and str(tmp_path / "records") in text
    assert refs and all(stderr.freed), "what the failed work built was still held when the line was written"
