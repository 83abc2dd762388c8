"""task=mqar's generator, drawn as tensors: Zoology's distribution checked on a few thousand draws against weights
computed here, deterministic for a seed, longer runs extending shorter ones, and validation disjoint from training."""

from __future__ import annotations

import math
import random

import pytest
import torch

from attention_lab.config import TaskConfig
from attention_lab.data.corpus import PAD_ID, Vocabulary, read_sentences
from attention_lab.data.tasks import build_task
from attention_lab.errors import ConfigError

SENTENCES = read_sentences(None)
CHI2_11_999 = 31.26  # the 0.999 quantile of chi-square with 11 degrees of freedom (12 slots)
CHI2_31_999 = 61.10  # ... with 31 (32 keys)


def mqar(words: int = 64, **changes) -> tuple[Vocabulary, TaskConfig]:
    options = {"pairs": 4, **{key: changes.pop(key) for key in ("pairs", "power_a") if key in changes}}
    settings = {"name": "mqar", "words": words, "max_len": 32, "train_size": 4000, "val_size": 100, **changes}
    return Vocabulary.for_task(SENTENCES, words), TaskConfig(**settings, options=options)


def drawn(vocab: Vocabulary, config: TaskConfig, seed: int = 0):
    return build_task("mqar").tensors(vocab, SENTENCES, config, random.Random(seed))


def chi_square(counts: list[int], probabilities: list[float]) -> float:
    total = sum(counts)
    return sum((c - total * p) ** 2 / (total * p) for c, p in zip(counts, probabilities, strict=True))


def slots_of(inputs: torch.Tensor, targets: torch.Tensor, pairs: int) -> torch.Tensor:
    """(N, pairs): the slot at which each key (in the order of the pairs) is asked."""
    slots = torch.empty(len(inputs), pairs, dtype=torch.long)
    for row, (src, tgt) in enumerate(zip(inputs.tolist(), targets.tolist(), strict=True)):
        asked = {src[p]: (p - 2 * pairs) // 2 for p, t in enumerate(tgt) if t != PAD_ID}
        slots[row] = torch.tensor([asked[key] for key in src[0:2 * pairs:2]])
    return slots


def test_the_first_two_keys_are_asked_at_slots_drawn_without_replacement_by_the_power_law():
    """Key 0's slot is the first draw: ∝ (g + 1)^(a − 1); key 1's the second: Σ_h w_h/W · w_g/(W − w_h) over h ≠ g
    (numpy's choice without replacement, Zoology's). Weights computed here, not read from the task."""
    vocab, config = mqar(train_size=6000)
    (inputs, targets), _ = drawn(vocab, config)
    slots = slots_of(inputs, targets, 4)
    weights = [(g + 1) ** (0.01 - 1) for g in range(12)]
    total = sum(weights)
    first = [w / total for w in weights]
    second = [sum(weights[h] / total * weights[g] / (total - weights[h]) for h in range(12) if h != g)
              for g in range(12)]
    assert sum(second) == pytest.approx(1)
    for column, law in ((0, first), (1, second)):
        counts = torch.bincount(slots[:, column], minlength=12).tolist()
        assert chi_square(counts, law) < CHI2_11_999
        assert chi_square(counts, [1 / 12] * 12) > 3 * CHI2_11_999  # a uniform slot would fail the line above
    assert (slots.sort(dim=1).values.diff(dim=1) > 0).all()  # four distinct slots per input


def test_keys_are_uniform_over_the_key_half_and_values_over_the_value_half():
    vocab, config = mqar(train_size=6000)
    (inputs, _), _ = drawn(vocab, config, seed=1)
    words = torch.tensor([vocab.stoi[w] for w in vocab.words])
    for column, half in ((0, words[:32]), (1, words[32:])):
        first = inputs[:, column]
        assert torch.isin(first, half).all()
        counts = [(first == word).sum().item() for word in half.tolist()]
        assert chi_square(counts, [1 / 32] * 32) < CHI2_31_999
    keys, values = inputs[:, 0:8:2], inputs[:, 1:8:2]
    assert (keys.sort(dim=1).values.diff(dim=1) > 0).all() and (values.sort(dim=1).values.diff(dim=1) > 0).all()


def test_a_seed_gives_the_same_data_and_a_longer_run_starts_with_the_shorter_ones_inputs():
    vocab, config = mqar(train_size=3000)
    (train, train_targets), (val, _) = drawn(vocab, config, seed=5)
    (again, _), (val_again, _) = drawn(vocab, config, seed=5)
    assert torch.equal(train, again) and torch.equal(val, val_again)
    (other, _), _ = drawn(vocab, config, seed=6)
    assert not torch.equal(train, other)
    # Enough rows for several chunks of the generator: the first 3000 are the shorter run's, validation unchanged.
    (longer, longer_targets), (longer_val, _) = drawn(vocab, TaskConfig(**{**vars(config), "train_size": 140_000}),
                                                      seed=5)
    assert torch.equal(longer[:3000], train) and torch.equal(longer_targets[:3000], train_targets)
    assert torch.equal(longer_val, val)


def test_validation_inputs_are_distinct_and_no_training_input_is_one_of_them():
    """17 words, one pair, one slot: 8 x 9 = 72 inputs, 66 of them validation: every training input is one of the
    other 6, which the redraws must reach."""
    vocab, config = mqar(words=17, pairs=1, max_len=4, train_size=3000, val_size=66)
    (train, _), (val, _) = drawn(vocab, config)
    val_rows, train_rows = set(map(tuple, val.tolist())), set(map(tuple, train.tolist()))
    assert len(val_rows) == 66 and len(train) == 3000
    assert not val_rows & train_rows and len(train_rows) == 6


def test_more_validation_inputs_than_the_task_can_make_is_one_line():
    vocab, config = mqar(words=17, pairs=1, max_len=4, val_size=72)  # 8 x 9 inputs: none left for training
    with pytest.raises(ConfigError) as err:
        build_task("mqar").check(vocab, SENTENCES, config)
    assert str(err.value).startswith("task.val_size=72 is invalid for task=mqar") and "only 72 distinct" in str(err.value)
    assert "\n" not in str(err.value) and math.perm(8, 1) * math.perm(9, 1) == 72


def test_pairs_are_the_tensors_as_lists():
    vocab, config = mqar(train_size=50, val_size=20)
    (train, train_targets), (val, _) = drawn(vocab, config, seed=2)
    train_pairs, val_pairs = build_task("mqar").pairs(vocab, SENTENCES, config, random.Random(2))
    assert train_pairs == list(zip(train.tolist(), train_targets.tolist(), strict=True))
    assert [inputs for inputs, _ in val_pairs] == val.tolist()
