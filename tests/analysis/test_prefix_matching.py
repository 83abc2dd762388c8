"""Olsson et al.'s prefix-matching score: the induction pattern measured on a fixed probe of random words
repeated twice, the same for every task, not on the validation batch."""

from __future__ import annotations

import pytest
import torch

from attention_lab.analysis.head_scores import BATCH_KINDS, HEAD_SCORE_KINDS, PROBE_KINDS, head_scores
from attention_lab.analysis.prefix_matching import PROBE_ROWS, repeated_random_words
from attention_lab.attention.hooks import capture
from conftest import validated_untrained

VOCAB = ["<pad>", "<unk>", "<bos>", *(f"w{i}" for i in range(20))]


def test_the_probe_is_random_words_repeated_twice_and_fixed():
    probe = repeated_random_words(VOCAB, context_length=16)
    assert probe.shape == (PROBE_ROWS, 16)
    first, second = probe[:, :8], probe[:, 8:]
    assert torch.equal(first, second)
    assert all(len(set(row)) == 8 for row in first.tolist())  # distinct: one earlier occurrence per query
    assert int(probe.min()) >= 3  # no <pad>, <unk>, <bos>
    assert len({tuple(row) for row in first.tolist()}) > 1  # random rows
    assert torch.equal(probe, repeated_random_words(VOCAB, context_length=16))  # the same in every run
    assert repeated_random_words(VOCAB[:6], context_length=16).shape == (PROBE_ROWS, 6)  # 3 words, twice


def test_prefix_matching_is_a_registered_kind_measured_on_the_probe():
    assert "prefix_matching" in HEAD_SCORE_KINDS and PROBE_KINDS <= set(HEAD_SCORE_KINDS)
    assert "prefix_matching" not in BATCH_KINDS


def test_a_prefix_matching_head_scores_one_on_the_probe():
    probe = repeated_random_words(VOCAB, context_length=8)  # 4 words, twice
    t = probe.shape[1]
    matching = torch.zeros(t, t)
    previous = torch.zeros(t, t)
    for query in range(t):
        matching[query, query - 3 if query >= 4 else 0] = 1.0  # the word after the earlier copy: t - L + 1
        previous[query, max(query - 1, 0)] = 1.0
    weights = torch.stack([matching, previous])[None].expand(len(probe), -1, -1, -1)  # (R, 2, T, T)
    scores = head_scores(weights, probe, probe != 0, PROBE_KINDS)
    assert set(scores) == {"prefix_matching"}
    assert scores["prefix_matching"].tolist() == pytest.approx([1.0, 0.0])


def test_the_module_logs_it_from_the_probe_whatever_the_task(tmp_path):
    """task=sort: its validation inputs are sorted sentences, yet prefix matching is the model's attention on the
    probe, computed here from the probe's known layout (query t of the second copy -> key t - L + 1)."""
    torch.set_num_threads(1)
    cfg, module, datamodule, (metrics,) = validated_untrained(
        ["task=sort", "task.train_size=64", "task.val_size=32", "d_model=16", "layers=2", "mask=causal", "seed=0"],
        tmp_path, seed=0)
    probe = repeated_random_words(datamodule.vocab.itos, cfg.model.context_length)
    length = probe.shape[1] // 2
    with torch.no_grad(), capture(module.model, points=("weights",)) as cache:
        module(probe)
    for layer, weights in enumerate(cache.layers("weights")):  # (R, H, T, T)
        expected = torch.stack([weights[:, :, t, t - length + 1] for t in range(length, 2 * length)]).mean((0, 1))
        for head, value in enumerate(expected.tolist()):
            assert metrics[f"head_score/prefix_matching/layer{layer}/head{head}"] == pytest.approx(value, rel=1e-5)
