"""What a run dir can make the attention tab do: each answer is its own request's, sizes read from an event file
or a checkpoint are bounded before anything is allocated, a checkpoint outside the logdir is refused, and every
error is one JSON line. Every payload here is the real one, written with TensorBoard's public protos and writer
or with torch.save, and called through the plugin's WSGI app."""

from __future__ import annotations

import random
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from test_tensorboard_tab import client_for, get

CONCURRENT = 100


def run_name(client, prefix: str) -> str:
    return next(r["run"] for r in get(client, "runs").get_json()["runs"] if r["run"].startswith(prefix))


@pytest.fixture(scope="module")
def good_logdir(tiny_trained_run, tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tab_bounds")
    shutil.copytree(tiny_trained_run, root / "good")
    return root


def test_concurrent_sentences_each_get_their_own_maps(good_logdir):
    from attention_lab.review.maps import find_run, load_module

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
