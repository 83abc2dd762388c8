"""What a run dir can make the attention tab do: each answer is its own request's, sizes read from an event file
or a checkpoint are bounded before anything is allocated, a checkpoint outside the logdir is refused, and every
error is one JSON line. Every payload here is the real one, written with TensorBoard's public protos and writer
or with torch.save, and called through the plugin's WSGI app."""

from __future__ import annotations

import json
import random
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from test_tensorboard_tab import ROUTE, client_for, get, run_name

from tab_runs import write_run

CONCURRENT = 100  # distinct sentences at once; before each loaded model had its own lock, 4 to 15 came back wrong


@pytest.fixture(scope="module")
def good_logdir(tiny_trained_run, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tab_bounds")
    shutil.copytree(tiny_trained_run, root / "good")
    return root


def test_concurrent_sentences_each_get_their_own_maps(good_logdir):
    """Each answer is compared with the answer to the same sentence asked alone."""
    from attention_lab.records.trained_run import find_run, load_module

    client = client_for(good_logdir)
    run = run_name(client, "good/")
    module, _ = load_module(find_run(good_logdir / "good"))
    vocab = [word for word in module.vocab if not word.startswith("<")]
    chooser = random.Random(0)
    texts = list(dict.fromkeys(" ".join(chooser.choices(vocab, k=chooser.randint(3, 8))) for _ in range(3 * CONCURRENT)))
    texts = texts[:CONCURRENT]
    assert len(texts) == CONCURRENT
    alone = {text: get(client, "sentence", run=run, text=text).get_json() for text in texts}

    def ask(text: str) -> dict:
        return get(client_for_app(client), "sentence", run=run, text=text).get_json()

    with ThreadPoolExecutor(max_workers=CONCURRENT) as pool:
        together = dict(zip(texts, pool.map(ask, texts), strict=True))
    wrong = [text for text in texts if not same_maps(together[text], alone[text])]
    assert not wrong, f"{len(wrong)} of {CONCURRENT} concurrent answers carried another sentence's maps"


def same_maps(answer: dict, expected: dict) -> bool:
    if answer["words"] != expected["words"]:
        return False
    pairs = list(zip(answer["weights"], expected["weights"], strict=True))
    return all(np.shape(got) == np.shape(want) and np.allclose(got, want, atol=1e-6) for got, want in pairs)


def client_for_app(client):
    from werkzeug import test as werkzeug_test
    from werkzeug import wrappers

    return werkzeug_test.Client(client.application, wrappers.Response)


# ------------------------------------------------------------------------------------------- event files

def strict_json(response) -> dict:
    """A JSON answer that a browser's JSON.parse accepts (no bare NaN or Infinity). TensorBoard's ``Respond`` writes
    NaN and infinities as the strings "NaN" and "Infinity", which the page cannot draw: the tests compare with
    the numbers or nulls expected."""
    def refuse(constant):
        raise AssertionError(f"{constant} is not JSON")

    assert response.mimetype == "application/json", response.get_data()[:200]
    return json.loads(response.get_data(as_text=True), parse_constant=refuse)


def write_probe(run_dir: Path, words: list[str], tensor) -> Path:
    """One probe record holding ``tensor`` (a TensorProto), written with TensorBoard's public event writer, as
    the lab's callback writes it."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.summary.writer.event_file_writer import EventFileWriter

    from attention_lab.records.probe_summary import PROBE_TAG, WordLayout, summary_metadata

    folder = run_dir / "tensorboard" / "version_0"
    writer = EventFileWriter(str(folder), filename_suffix=".attention")
    value = summary_pb2.Summary.Value(tag=PROBE_TAG, metadata=summary_metadata(WordLayout(words, words)),
                                      tensor=tensor)
    writer.add_event(event_pb2.Event(step=1, wall_time=1.0, summary=summary_pb2.Summary(value=[value])))
    writer.close()
    return folder


def one_value(shape: tuple[int, ...]):
    """A float16 tensor that declares ``shape`` and holds one value: TensorBoard repeats it to fill the shape."""
    from tensorboard.compat.proto import tensor_pb2, tensor_shape_pb2, types_pb2

    dims = [tensor_shape_pb2.TensorShapeProto.Dim(size=size) for size in shape]
    return tensor_pb2.TensorProto(dtype=types_pb2.DT_HALF, tensor_shape=tensor_shape_pb2.TensorShapeProto(dim=dims),
                                  half_val=[int(np.float16(0.5).view(np.uint16))])


WIDE = [f"w{i}" for i in range(1000)]
PAYLOADS = {
    "terabytes": (["Life"], one_value((1000, 1000, 1000, 1000))),  # 10**12 float16 from a few hundred bytes
    "wide": (WIDE, one_value((1, 1, len(WIDE), len(WIDE)))),  # a million weights: megabytes of JSON to draw
    "text": (["x"], None),  # a string tensor of the right shape
    "truncated": (["Life", "is"], None),  # fewer numbers than its shape needs
}


@pytest.mark.parametrize("payload", list(PAYLOADS))
def test_an_event_file_cannot_make_the_tab_allocate(tmp_path, payload):
    import tracemalloc

    from tensorboard.util import tensor_util

    words, tensor = PAYLOADS[payload]
    if payload == "text":
        tensor = tensor_util.make_tensor_proto(np.array([b"x"], dtype=object).reshape(1, 1, 1, 1))
    elif payload == "truncated":
        tensor = tensor_util.make_tensor_proto(np.full((1, 1, 2, 2), 0.25, dtype=np.float16))
        del tensor.half_val[-1]  # 3 of 4
    folder = write_probe(tmp_path / "crafted", words, tensor)
    assert sum(f.stat().st_size for f in folder.iterdir()) < 20_000  # the whole file
    client = client_for(tmp_path)
    tracemalloc.start()
    try:
        response = get(client, "maps", run="crafted/tensorboard/version_0")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert response.status_code == 404 and len(response.get_data()) < 2000
    assert "a record of this run is refused" in strict_json(response)["error"]
    assert peak < 20 * 2**20


def test_maps_with_nan_and_infinite_weights_are_json(tmp_path):
    from tensorboard.util import tensor_util

    weights = np.full((1, 2, 2, 2), 0.5, dtype=np.float16)
    weights[0, 0, 0, 0], weights[0, 1, 1, 1], weights[0, 1, 0, 1] = np.nan, np.inf, -np.inf
    write_probe(tmp_path / "nan", ["Life", "is"], tensor_util.make_tensor_proto(weights))
    data = strict_json(get(client_for(tmp_path), "maps", run="nan/tensorboard/version_0"))
    assert data["weights"] == [[[[None, 0.5], [0.5, 0.5]], [[0.5, None], [0.5, None]]]]


def test_a_scores_tag_of_a_far_layer_makes_no_grid(tmp_path):
    write_run(tmp_path / "far", steps=[], words=["Life"], maps=False,
              scalars={"head_score/induction/layer0/head0": [(10, 0.5)],
                       "head_score/induction/layer1999/head1999": [(10, 0.9)]})
    response = get(client_for(tmp_path), "scores", run="far/tensorboard/version_0", step="10")
    assert response.status_code == 200 and len(response.get_data()) < 2000
    assert [grid["cells"] for grid in strict_json(response)["grids"]] == [[[0.5]]]


def test_a_string_tensor_is_refused_as_a_record():
    from attention_lab.records.probe_summary import RecordError, WordLayout, check_weights

    with pytest.raises(RecordError, match="not of numbers"):
        check_weights(np.array([b"x"], dtype=object).reshape(1, 1, 1, 1), WordLayout(["x"], ["x"]))


# ------------------------------------------------------------------------------------------- checkpoints

def rewrite_checkpoint(run_dir: Path, change) -> None:
    """Every checkpoint of ``run_dir`` loaded as data, changed by ``change(checkpoint)`` and saved again."""
    import torch

    for path in (run_dir / "checkpoints").glob("*.ckpt"):
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
        change(checkpoint)
        torch.save(checkpoint, path)


def test_sentence_through_nan_weights_is_json(good_logdir, tmp_path):
    shutil.copytree(good_logdir / "good", tmp_path / "nan")

    def poison(checkpoint):
        checkpoint["state_dict"]["model.blocks.0.attention.W_query.weight"].fill_(float("nan"))

    rewrite_checkpoint(tmp_path / "nan", poison)
    client = client_for(tmp_path)
    data = strict_json(get(client, "sentence", run=run_name(client, "nan/"), text="Life is short"))
    assert data["weights"][0][0][0] == [None, None, None]


def test_a_checkpoint_that_declares_a_huge_model_is_refused_once(good_logdir, tmp_path, monkeypatch):
    from attention_lab.records import trained_run

    shutil.copytree(good_logdir / "good", tmp_path / "huge")

    def huge(checkpoint):
        checkpoint["hyper_parameters"]["model"]["context_length"] = 20_000_000

    rewrite_checkpoint(tmp_path / "huge", huge)
    loads = []
    load_module = trained_run.load_module
    monkeypatch.setattr(trained_run, "load_module", lambda files: loads.append(files) or load_module(files))
    client = client_for(tmp_path)
    run = run_name(client, "huge/")
    for _ in range(2):
        response = get(client, "sentence", run=run, text="Life is short")
        assert response.status_code == 422
        assert "hyper-parameters declare model.context_length=20000000" in strict_json(response)["error"]
    assert len(loads) == 1  # the failure is remembered


def test_a_slow_checkpoint_does_not_hold_up_other_runs(good_logdir, tmp_path, monkeypatch):
    import threading

    from attention_lab.records import trained_run

    for name in ("slow", "quick"):
        shutil.copytree(good_logdir / "good", tmp_path / name)
    started, release = threading.Event(), threading.Event()
    load_module = trained_run.load_module

    def held(files):
        if files.run_dir.name == "slow":
            started.set()
            release.wait()
        return load_module(files)

    monkeypatch.setattr(trained_run, "load_module", held)
    client = client_for(tmp_path)
    slow, quick = run_name(client, "slow/"), run_name(client, "quick/")
    answers = {}

    def ask(run: str) -> None:
        answers[run] = get(client_for_app(client), "sentence", run=run, text="Life is short").status_code

    threads = [threading.Thread(target=ask, args=(run,)) for run in (slow, quick)]
    try:
        threads[0].start()
        assert started.wait(timeout=120)
        threads[1].start()
        threads[1].join(timeout=120)
        assert answers.get(quick) == 200, "the quick run waited for the slow one"
    finally:
        release.set()
        for thread in threads:
            thread.join()
    assert answers[slow] == 200


@pytest.mark.parametrize("linked", ["checkpoints/last.ckpt", ".hydra/config.yaml"])
def test_a_link_out_of_the_logdir_is_refused(good_logdir, tmp_path, linked):
    outside = tmp_path / "outside"
    shutil.copytree(good_logdir / "good", outside)
    shutil.copytree(good_logdir / "good", tmp_path / "logdir" / "linked")
    target = tmp_path / "logdir" / "linked" / linked
    target.unlink()
    target.symlink_to(outside / linked)
    client = client_for(tmp_path / "logdir")
    response = get(client, "sentence", run=run_name(client, "linked/"), text="Life is short")
    assert response.status_code == 404 and "is not inside the log directory" in strict_json(response)["error"]


def test_the_data_server_loader_is_bounded_too(tmp_path):
    """TensorBoard's default loader when installed (the data server, ``--load_fast=true``) hands the provider the
    same records: a real server answers the crafted run with one JSON line and goes on serving the others."""
    import urllib.error

    from tb_server import serve

    logdir = tmp_path / "logdir"
    write_probe(logdir / "crafted", *PAYLOADS["terabytes"])
    write_run(logdir / "fine", steps=[10], words=["Life", "is"])
    with serve(logdir, tmp_path / "server.log",
               lambda server: len(server.get_json(f"{ROUTE}/runs")["runs"]) == 2, "--load_fast=true") as server:
        with pytest.raises(urllib.error.HTTPError) as refused:
            server.get(f"{ROUTE}/maps", run="crafted/tensorboard/version_0")
        assert refused.value.code == 404 and refused.value.headers["X-Content-Type-Options"] == "nosniff"
        assert "a record of this run is refused" in json.loads(refused.value.read())["error"]
        assert server.get_json(f"{ROUTE}/maps", run="fine/tensorboard/version_0")["steps"] == [10]


def test_a_record_appended_later_is_checked_too(tmp_path):
    """The tab reads each event file once and then what is appended: a crafted record added to a file it has
    already read (TFRecord files concatenate) is refused at the next request."""
    from tensorboard.backend import application
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from werkzeug import test as werkzeug_test
    from werkzeug import wrappers

    from attention_lab.tensorboard_plugin.plugin import AttentionPlugin

    write_run(tmp_path / "run", steps=[10], words=["Life"], layers=1, heads=1)
    crafted = write_probe(tmp_path / "crafted", *PAYLOADS["terabytes"])
    multiplexer = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={"attention_lab": 0})
    multiplexer.AddRunsFromDirectory(str(tmp_path / "run"))
    multiplexer.Reload()
    context = base_plugin.TBContext(logdir=str(tmp_path / "run"),
                                    data_provider=data_provider.MultiplexerDataProvider(multiplexer, str(tmp_path)))
    client = werkzeug_test.Client(application.TensorBoardWSGI([AttentionPlugin(context)]), wrappers.Response)
    run = "tensorboard/version_0"
    assert get(client, "maps", run=run).get_json()["steps"] == [10]
    probe_file = next((tmp_path / "run" / run).glob("*tfevents*"))
    with probe_file.open("ab") as handle:
        handle.write(next(crafted.iterdir()).read_bytes())
    multiplexer.Reload()
    response = get(client, "maps", run=run)
    assert response.status_code == 404 and "a record of this run is refused" in strict_json(response)["error"]


def test_an_unforeseen_failure_is_one_json_line(tmp_path, caplog):
    """A failure no check foresaw (here the provider's own) still reaches the page as JSON with nosniff; its
    traceback goes to the server's log."""
    from tensorboard.backend import application
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from werkzeug import test as werkzeug_test
    from werkzeug import wrappers

    from attention_lab.tensorboard_plugin.plugin import AttentionPlugin

    class Failing(data_provider.MultiplexerDataProvider):
        def read_tensors(self, ctx=None, **kwargs):
            raise RuntimeError("the provider failed")

    write_run(tmp_path / "run", steps=[10], words=["Life"], layers=1, heads=1)
    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(tmp_path))
    multiplexer.Reload()
    context = base_plugin.TBContext(logdir=str(tmp_path), data_provider=Failing(multiplexer, str(tmp_path)))
    client = werkzeug_test.Client(application.TensorBoardWSGI([AttentionPlugin(context)]), wrappers.Response)
    response = get(client, "maps", run="run/tensorboard/version_0")
    assert response.status_code == 500 and "TensorBoard's log has the details" in strict_json(response)["error"]
    assert [r for r in caplog.records if r.exc_info and "the provider failed" in str(r.exc_info[1])]
