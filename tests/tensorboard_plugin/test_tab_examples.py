"""What the attention tab offers to type, from a run's checkpoint (tensorboard_plugin/examples.py), through the
plugin's routes in this process: the vocabulary the sentence box lists, and the example pair of the patching box,
checked against the checkpoint run here word by word."""

from __future__ import annotations

import shutil

import pytest
from test_tensorboard_tab import client_for, get

from attention_lab.tensorboard_plugin.examples import MAX_TRIED, MAX_TRIED_TOKENS, changes_to_try
from tab_runs import write_run

PROBE = "Life is short eat dessert first"  # the reverse task's probe: the tiny run's maps show it


@pytest.fixture(scope="module")
def trained(tiny_trained_run, tmp_path_factory):
    """(client, run name, module) over the shared trained run (2 layers x 4 heads, task reverse), beside a run
    with maps and no checkpoint."""
    from attention_lab.records.trained_run import find_run, load_module

    root = tmp_path_factory.mktemp("tab_examples")
    shutil.copytree(tiny_trained_run, root / "good")
    write_run(root / "bare", steps=[10], words=PROBE.split(), name="")
    client = client_for(root)
    run = next(r["run"] for r in get(client, "runs").get_json()["runs"] if r["run"].startswith("good/"))
    module, _ = load_module(find_run(root / "good"))
    return client, run, module


def last_logits(module, words: list[str]):
    """The logits after the last of ``words``, the sentence run alone through the checkpoint's model."""
    import torch

    with torch.no_grad():
        return module(torch.tensor([[module.vocab.index(word) for word in words]]))[0, -1].double()


def test_the_vocabulary_lists_the_words_a_sentence_may_use(trained):
    client, run, module = trained
    data = get(client, "vocabulary", run=run).get_json()
    assert data["words"] == [word for word in module.vocab if word not in ("<pad>", "<unk>", "<bos>")]
    assert data["size"] == len(data["words"]) == len(module.vocab) - 2 and "Life" in data["words"]


def test_the_example_pair_is_the_clearest_one_word_change_that_flips_the_prediction(trained):
    """Every one-word change of the probe to a word not in it, run here one at a time: the example is one whose
    prediction after the last word differs from the probe's, by the widest logit margin of them all."""
    client, run, module = trained
    data = get(client, "example_pair", run=run, text=PROBE).get_json()
    pair, words = data["pair"], PROBE.split()
    assert pair["clean"] == PROBE and data["checkpoint"] in ("last.ckpt", "best.ckpt")
    right = int(last_logits(module, words).argmax())
    margins = {}
    for position in range(len(words)):
        for word in module.vocab:
            if word in words or word.startswith("<"):
                continue
            changed = [word if t == position else w for t, w in enumerate(words)]
            logits = last_logits(module, changed)
            if int(logits.argmax()) != right:
                margins[" ".join(changed)] = float(logits.max() - logits[right])
    assert margins, "no one-word change flips this model's prediction"
    assert pair["corrupted"] == max(margins, key=margins.get)
    assert data["tried"] == len(words) * (len(module.vocab) - 2 - len(words))  # every change, within the bounds
    assert pair["clean_prediction"] == module.vocab[right]
    assert pair["corrupted_prediction"] == module.vocab[int(last_logits(module, pair["corrupted"].split()).argmax())]
    changed = [t for t, (a, b) in enumerate(zip(words, pair["corrupted"].split(), strict=True)) if a != b]
    assert changed == [pair["position"]]
    # the pair the tab fills in is one the patching route accepts
    patched = get(client, "patch_pair", run=run, clean=pair["clean"], corrupted=pair["corrupted"])
    assert patched.status_code == 200 and len(patched.get_json()["cells"]) == 2


def test_the_changes_tried_stay_within_their_bounds():
    """A long sentence over a large vocabulary: at most MAX_TRIED changes and MAX_TRIED_TOKENS tokens, the same
    words at every position, none special and none already in the sentence."""
    ids = list(range(10, 510))  # 500 words
    changes = changes_to_try(ids, 100_000, special={0, 1})
    assert 0 < len(changes) <= MAX_TRIED and len(changes) * len(ids) <= MAX_TRIED_TOKENS
    words, positions = {word for _, word in changes}, sorted({position for position, _ in changes})
    assert not words & (set(ids) | {0, 1}) and positions[0] == 0 and positions[-1] >= 0.8 * len(ids)  # spread
    short = changes_to_try([5, 6], 20, special={0, 1})  # every other word at both positions
    assert short == [(p, w) for p in (0, 1) for w in range(2, 20) if w not in (5, 6)]


def test_without_a_checkpoint_or_a_text_one_line(trained):
    client, _, _ = trained
    bare = next(r["run"] for r in get(client, "runs").get_json()["runs"] if r["run"].startswith("bare/"))
    for route, params in (("vocabulary", {}), ("example_pair", {"text": PROBE})):
        reply = get(client, route, run=bare, **params)
        assert reply.status_code == 404 and "\n" not in reply.get_json()["error"], reply.get_json()
    missing = get(client, "example_pair", run=trained[1])
    assert missing.status_code == 400 and missing.get_json()["error"] == "the request names no text"
    unknown = get(client, "vocabulary", run="nope")
    assert unknown.status_code == 404 and "no run named 'nope'" in unknown.get_json()["error"]
