"""Olsson et al.'s prefix-matching score: the induction pattern measured on a fixed probe of random words whose
repeats are rotated, the same for every task, not on the validation batch."""

from __future__ import annotations

import pytest
import torch

from attention_lab.analysis.head_scores import BATCH_KINDS, HEAD_SCORE_KINDS, PROBE_KINDS, head_scores
from attention_lab.analysis.prefix_matching import prefix_probe, repeated_random_words
from attention_lab.attention.hooks import capture
from conftest import validated_untrained

VOCAB = ["<pad>", "<unk>", "<bos>", *(f"w{i}" for i in range(20))]


def test_the_probe_is_fixed_and_fits_a_small_vocabulary_or_context():
    probe = repeated_random_words(VOCAB, context_length=16)
    assert probe.shape[1] == 16 and int(probe.min()) >= 3  # no <pad>, <unk>, <bos>
    assert torch.equal(probe, repeated_random_words(VOCAB, context_length=16))  # the same in every run
    assert repeated_random_words(VOCAB[:6], context_length=16).shape[1] == 3  # 3 words: rows of 3
    assert repeated_random_words(VOCAB, context_length=8).shape[1] == 8


def test_prefix_matching_is_a_registered_kind_measured_on_the_probe():
    assert "prefix_matching" in HEAD_SCORE_KINDS and PROBE_KINDS <= set(HEAD_SCORE_KINDS)
    assert "prefix_matching" not in BATCH_KINDS


def test_a_prefix_matching_head_scores_one_on_the_probe():
    probe = prefix_probe(VOCAB, context_length=8)
    rows, t = probe.tokens.shape
    matching = torch.zeros(rows, t, t)
    previous = torch.zeros(rows, t, t)
    for query in range(t):
        previous[:, query, max(query - 1, 0)] = 1.0
        matching[:, query, 0] = 1.0  # where no earlier copy: anywhere
    for row, query, earlier in probe.occurrences():
        matching[row, query] = 0.0
        matching[row, query, earlier + 1] = 1.0  # the word after the earlier copy
    weights = torch.stack([matching, previous], dim=1)  # (R, 2, T, T)
    scores = head_scores(weights, probe.tokens, probe.tokens != 0, PROBE_KINDS)
    assert set(scores) == {"prefix_matching"}
    assert scores["prefix_matching"][0] == pytest.approx(1.0) and scores["prefix_matching"][1] < 0.5


def test_the_module_logs_it_from_the_probe_whatever_the_task(tmp_path):
    """task=sort: its validation inputs are sorted sentences, yet prefix matching is the model's attention on the
    probe, computed here from the probe's known layout (each query of the repeat -> the key after its earlier copy)."""
    torch.set_num_threads(1)
    cfg, module, datamodule, (metrics,) = validated_untrained(
        ["task=sort", "task.train_size=64", "task.val_size=32", "d_model=16", "layers=2", "mask=causal", "seed=0"],
        tmp_path, seed=0)
    probe = prefix_probe(datamodule.vocab.itos, cfg.model.context_length)
    with torch.no_grad(), capture(module.model, points=("weights",)) as cache:
        module(probe.tokens)
    for layer, weights in enumerate(cache.layers("weights")):  # (R, H, T, T)
        expected = torch.stack([weights[row, :, query, earlier + 1]
                                for row, query, earlier in probe.occurrences()]).mean(0)
        for head, value in enumerate(expected.tolist()):
            assert metrics[f"head_score/prefix_matching/layer{layer}/head{head}"] == pytest.approx(value, rel=1e-5)
