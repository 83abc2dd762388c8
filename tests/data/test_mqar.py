"""task=mqar, Zoology's multi-query associative recall: keys and values from disjoint halves of the vocabulary, queries
at power-law gaps, every target its key's value; and the experiment=mqar preset that races the mixers on it."""

from __future__ import annotations

import random

import pytest
from hydra import compose

from attention_lab.checks import validate
from attention_lab.config import TaskConfig
from attention_lab.data.corpus import PAD_ID, Vocabulary, read_sentences
from attention_lab.data.tasks import build_task
from attention_lab.data.tasks.mqar import gap_weights
from attention_lab.errors import ConfigError
from attention_lab.run.overrides import hydra_compose_api
from attention_lab.run.sweep_jobs import planned_jobs, sweep_arguments
from conftest import CONFIG_DIR

SENTENCES = read_sentences(None)
VOCAB = Vocabulary.for_task(SENTENCES, 256)
CHI2_15_999 = 37.70  # the 0.999 quantile of chi-square with 15 degrees of freedom (16 slots)


def mqar(**changes) -> TaskConfig:
    """mqar's config with ``changes``: to its options (pairs, power_a) or to the shared settings."""
    options = {"pairs": 4, **{key: changes.pop(key) for key in ("pairs", "power_a") if key in changes}}
    settings = {"name": "mqar", "words": 256, "max_len": 32, "train_size": 1500, "val_size": 200, **changes}
    return TaskConfig(**settings, options=options)


def examples(config: TaskConfig, seed: int = 0):
    train, val = build_task("mqar").pairs(VOCAB, SENTENCES, config, random.Random(seed))
    return train + val


def test_keys_and_values_come_from_disjoint_halves_of_the_vocabulary():
    words = [VOCAB.stoi[w] for w in VOCAB.words]
    key_half, value_half = set(words[:128]), set(words[128:])
    keys_seen, values_seen = set(), set()
    for inputs, _ in examples(mqar()):
        keys, values = inputs[0:8:2], inputs[1:8:2]
        assert set(keys) <= key_half and set(values) <= value_half
        assert len(set(keys)) == 4 and len(set(values)) == 4  # distinct within an input, as Zoology's
        keys_seen |= set(keys)
        values_seen |= set(values)
    assert keys_seen == key_half and values_seen == value_half  # every word of each half is used


def test_every_key_is_asked_once_after_the_pairs_and_its_target_is_its_value():
    for inputs, targets in examples(mqar()):
        assert len(inputs) == len(targets) == 32
        value_of = dict(zip(inputs[0:8:2], inputs[1:8:2], strict=True))
        asked = [p for p, target in enumerate(targets) if target != PAD_ID]
        assert sorted(inputs[p] for p in asked) == sorted(value_of)  # each key once
        assert all(p >= 8 and (p - 8) % 2 == 0 for p in asked)  # at every other position after the pairs
        assert all(targets[p] == value_of[inputs[p]] for p in asked)
        assert all(inputs[p] == PAD_ID for p in range(8, 32) if p not in asked)  # Figure 2: no random words


def slot_counts(config: TaskConfig, seed: int) -> list[int]:
    pairs = config.options["pairs"]
    counts = [0] * ((config.max_len - 2 * pairs) // 2)
    for _, targets in examples(config, seed):
        for position, target in enumerate(targets):
            if target != PAD_ID:
                counts[(position - 2 * pairs) // 2] += 1
    return counts


def chi_square(counts: list[int], probabilities: list[float]) -> float:
    total = sum(counts)
    return sum((c - total * p) ** 2 / (total * p) for c, p in zip(counts, probabilities, strict=True))


def test_one_query_lands_at_a_power_law_gap_and_not_a_uniform_one():
    config = mqar(pairs=1, max_len=34, train_size=3800, val_size=200)  # 16 slots, one draw each: the law itself
    counts = slot_counts(config, seed=3)
    power_law = gap_weights(16, 0.01)
    assert power_law[0] == pytest.approx(1 / sum(1 / (g + 1) ** 0.99 for g in range(16)))
    assert chi_square(counts, power_law) < CHI2_15_999
    assert chi_square(counts, [1 / 16] * 16) > 10 * CHI2_15_999  # uniform gaps would fail the test above
    uniform = slot_counts(mqar(pairs=1, max_len=34, train_size=3800, val_size=200, power_a=1.0), seed=3)
    assert chi_square(uniform, [1 / 16] * 16) < CHI2_15_999  # power_a=1: Zoology's uniform


def test_with_several_pairs_most_queries_come_soon_after_them():
    counts = slot_counts(mqar(), seed=1)  # 12 slots, 4 taken per input
    assert sum(counts[:4]) > 0.5 * sum(counts) > sum(counts[8:])  # uniform: a third in each


@pytest.mark.parametrize(("changes", "setting"), [
    ({"pairs": 9}, "task.options.pairs=9"),  # 9 pairs and 9 queries at every other position need 36 positions
    ({"pairs": 0}, "task.options.pairs=0"),
    ({"power_a": 0.0}, "task.options.power_a=0.0"),
    ({"power_a": 2}, "task.options.power_a=2"),
    ({"words": 17, "pairs": 9, "max_len": 64}, "task.options.pairs=9"),  # 17 words: halves of 8 and 9
])
def test_an_input_that_cannot_be_built_is_one_line(changes, setting):
    config = mqar(**changes)
    vocab = Vocabulary.for_task(SENTENCES, config.words)
    with pytest.raises(ConfigError) as err:
        build_task("mqar").check(vocab, SENTENCES, config)
    assert str(err.value).startswith(setting) and "\n" not in str(err.value)


def test_the_preset_races_every_mixer_at_every_width_and_learning_rate():
    mixers = ("multihead", "linear", "sigmoid", "conv", "retnet", "based", "mamba2", "gated_deltanet")
    widths, seeds = (16, 32, 64), (0, 1, 2)
    rates = (0.0001, 0.0003, 0.001, 0.003, 0.01, 0.03)  # 1e-4 ... 3e-2, half a decade apart
    with hydra_compose_api(CONFIG_DIR):
        preset = compose("train", overrides=["experiment=mqar"], return_hydra_config=True)
        full = compose("train", overrides=["experiment=mqar_full"], return_hydra_config=True)
        # Every mixer composes and passes the checks at the narrowest and the widest width (no rule reads the seed
        # or the learning rate, and with one head every width between is as valid).
        configs = [compose("train", overrides=["experiment=mqar", "seed=0", "lr=0.01", f"model={m}", f"d_model={d}"])
                   for m in mixers for d in (16, 64)]
    for config in configs:
        validate(config)
    jobs = [dict(line.split("=") for line in job) for job in planned_jobs(sweep_arguments(preset, []))]  # rung 0
    cells = len(mixers) * len(widths) * len(rates)
    assert len(jobs) == cells * len(seeds)
    assert {(job["model"], int(job["d_model"]), float(job["lr"]), int(job["seed"])) for job in jobs} == {
        (m, d, lr, s) for m in mixers for d in widths for lr in rates for s in seeds}
    ladder = preset.hydra.sweeper
    assert (ladder.search, list(ladder.rungs), list(ladder.keep)) == ("lr", [300, 1500, 6000], [None, 2, 1])
    # rates ranked by the loss, which separates rates still at chance accuracy
    assert (preset.optimized_metric, ladder.direction, full.hydra.sweeper.direction) == ("val/loss", "minimize",
                                                                                        "minimize")
    # the full protocol: the same race, wider, more seeds, a fourth rung
    assert (full.hydra.sweeper.params.d_model, full.hydra.sweeper.params.seed) == ("16,32,64,128,256,512", "0,1,2,3,4")
    assert full.hydra.sweeper.params.model == ladder.params.model and full.hydra.sweeper.params.lr == ladder.params.lr
    assert list(full.hydra.sweeper.rungs) == [500, 2000, 6000, 20000]
    assert {(c.model.name, c.d_model, c.lr, c.seed) for c in configs} == {(m, d, 0.01, 0) for m in mixers for d in (16, 64)}
    for config in configs:  # one task, fresh inputs, attention-only blocks (residual and norm, no MLP)
        assert (config.task.name, config.task.words, config.task.options.pairs, config.task.max_len) == ("mqar", 64, 4, 32)
        assert config.task.train_size is None  # max_steps x batch_size: every step new inputs
        assert (config.block.name, config.block.mlp, config.block.residual, config.block.layer_norm) == (
            "attention_only", False, True, True)
        assert (config.mask, config.heads, config.model.context_length) == ("causal", 1, 32)


def test_the_probe_is_vocabulary_words_the_pairs_then_the_queries():
    probe = build_task("mqar").probe(VOCAB, SENTENCES, mqar())
    assert len(probe) == 12 and set(probe) <= set(VOCAB.words)
    assert sorted(probe[8:]) == sorted(probe[0:8:2])  # every key asked once
