"""The recall and induction tasks: what their examples hold, checked against an independent reading of each
input; train and val disjoint; the same data for the same seed; the settings they reject; and a training run of
each through scripts/train.py."""

from __future__ import annotations

import dataclasses
import json
import random
import re

import pytest

from attention_lab.config import TaskConfig
from attention_lab.data.corpus import PAD_ID, Vocabulary, read_sentences
from attention_lab.data.tasks import TASK_REGISTRY, build_task
from attention_lab.errors import ConfigError
from conftest import ROOT, compose_config, run_train

SENTENCES = read_sentences()
VOCAB = Vocabulary.from_sentences(SENTENCES)
WORD_IDS = {VOCAB.stoi[w] for w in VOCAB.words}


def recall_config(**changes) -> TaskConfig:
    """recall's config with ``changes``: to its options (pairs, queries) or to the shared settings."""
    options = {"pairs": 4, "queries": 2, **{key: changes.pop(key) for key in ("pairs", "queries") if key in changes}}
    values = dict(name="recall", max_len=16, train_size=300, val_size=100)
    return TaskConfig(**{**values, **changes}, options=options)


def induction_config(**changes) -> TaskConfig:
    values = dict(name="induction", min_len=6, max_len=16, train_size=300, val_size=100)
    return TaskConfig(**{**values, **changes})


def build(config: TaskConfig, seed: int = 0):
    return build_task(config.name).pairs(VOCAB, SENTENCES, config, random.Random(seed))


@pytest.mark.parametrize(("pairs", "queries"), [(4, 2), (1, 1), (6, 4), (3, 3)])
def test_recall_targets_are_the_values_of_the_queried_keys(pairs, queries):
    config = recall_config(pairs=pairs, queries=queries, train_size=200, val_size=50)
    train, val = build(config)
    assert (len(train), len(val)) == (200, 50)
    for inputs, targets in train + val:
        assert len(inputs) == len(targets) == 2 * pairs + queries
        assert set(inputs) <= WORD_IDS
        keys, values = inputs[0:2 * pairs:2], inputs[1:2 * pairs:2]
        assert len(set(keys)) == pairs  # distinct keys: each query has one answer
        table = dict(zip(keys, values, strict=True))
        asked = inputs[2 * pairs:]
        assert len(set(asked)) == queries and set(asked) <= set(keys)
        assert targets[:2 * pairs] == [PAD_ID] * (2 * pairs)  # no target on the pairs
        assert targets[2 * pairs:] == [table[key] for key in asked]


def test_recall_uses_every_key_position_and_varies_the_queries():
    train, _ = build(recall_config())
    # Each pair slot gets queried somewhere, and queries come in more than one order: no shortcut by position.
    slots = {inputs[:8:2].index(key) for inputs, _ in train for key in inputs[8:]}
    assert slots == {0, 1, 2, 3}
    assert len({tuple(inputs[:8:2].index(key) for key in inputs[8:]) for inputs, _ in train}) > 6


@pytest.mark.parametrize(("min_len", "max_len", "lengths"), [(6, 16, {3, 4, 5, 6, 7, 8}), (3, 8, {2, 3, 4}),
                                                              (7, 10, {4, 5}), (4, 4, {2})])
def test_induction_repeats_the_sequence_and_targets_the_earlier_next_word(min_len, max_len, lengths):
    train, val = build(induction_config(min_len=min_len, max_len=max_len, train_size=150, val_size=50))
    assert (len(train), len(val)) == (150, 50)
    seen_lengths = set()
    for inputs, targets in train + val:
        k = len(inputs) // 2
        seen_lengths.add(k)
        assert len(inputs) == len(targets) == 2 * k and min_len <= 2 * k <= max_len
        assert inputs[:k] == inputs[k:] and len(set(inputs[:k])) == k and set(inputs) <= WORD_IDS
        assert targets[:k] == [PAD_ID] * k and targets[-1] == PAD_ID
        for t in range(k, 2 * k - 1):
            earlier = inputs.index(inputs[t])  # the first occurrence of the current word
            assert earlier == t - k
            assert targets[t] == inputs[earlier + 1] == inputs[t + 1]  # causal: the next token, read off the copy
    assert seen_lengths == lengths


@pytest.mark.parametrize("config", [recall_config(), induction_config()], ids=["recall", "induction"])
def test_train_and_val_are_disjoint_and_the_seed_fixes_the_data(config):
    train, val = build(config, seed=3)
    inputs = [tuple(x) for x, _ in train + val]
    assert len(set(inputs)) == len(inputs)  # distinct within and across the splits
    assert not {tuple(x) for x, _ in train} & {tuple(x) for x, _ in val}
    assert build(config, seed=3) == (train, val)
    assert build(config, seed=4) != (train, val)


@pytest.mark.parametrize(("config", "setting"), [
    (recall_config(pairs=7, queries=3), "task.options.pairs=7"),        # 17 words > task.max_len=16
    (recall_config(pairs=5, max_len=10), "task.options.pairs=5"),       # 12 words > 10
    (recall_config(pairs=18, queries=1, max_len=40), "task.options.pairs=18"),  # the corpus has 17 distinct words
    (recall_config(pairs=2, queries=3), "task.options.queries=3"),      # more queries than keys
    (recall_config(pairs=0), "task.options.pairs=0"),
    (recall_config(queries=0), "task.options.queries=0"),
    (recall_config(pairs=1, queries=1, train_size=300), "task.train_size + task.val_size"),  # 17 * 17 inputs
    (induction_config(min_len=2, max_len=3), "task.max_len=3"),
    (induction_config(min_len=7, max_len=7), "task.min_len=7"),  # no even length in 7..7
    (induction_config(min_len=6, max_len=40), "task.max_len=40"),  # 20 distinct words: the corpus has 17
    (induction_config(min_len=4, max_len=5, train_size=300), "task.train_size + task.val_size"),  # 17 * 16 inputs
], ids=lambda v: v if isinstance(v, str) else None)
def test_settings_the_corpus_cannot_serve_fail_with_one_line_naming_them(config, setting):
    task = build_task(config.name)
    with pytest.raises(ConfigError) as err:
        task.check(VOCAB, SENTENCES, config)
    message = str(err.value)
    assert setting in message and "\n" not in message
    with pytest.raises(ConfigError):  # pairs() refuses the same settings
        task.pairs(VOCAB, SENTENCES, config, random.Random(0))


def test_the_task_yamls_compose_with_checkable_defaults():
    recall = compose_config(["task=recall"]).task
    options = build_task("recall").options_of(recall)  # none set: the class's defaults, as the docs give them
    assert (options.pairs, options.queries, recall.masks) == (4, 2, ["none", "causal", "padding"])
    build_task("recall").check(VOCAB, SENTENCES, recall)
    induction = compose_config(["task=induction", "mask=causal"]).task
    assert list(induction.masks) == ["causal"]
    build_task("induction").check(VOCAB, SENTENCES, induction)
    # The new knobs leave the other tasks as they were.
    assert compose_config(["task=reverse"]).task.max_len == 8


@pytest.mark.parametrize("overrides", [["task=recall"], ["task=induction", "mask=causal"]], ids=" ".join)
def test_train_script_runs_the_task(tmp_path, overrides):
    run_dir = tmp_path / "run"
    proc = run_train(run_dir, *overrides, "debug=fast")
    assert proc.returncode == 0
    config = (run_dir / ".hydra" / "config.yaml").read_text()
    assert f"name: {overrides[0].split('=')[1]}" in config
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert 0.0 <= metrics["val/token_acc"] <= 1.0 and metrics["val/loss"] > 0


def test_induction_without_a_causal_mask_is_refused(tmp_path):
    proc = run_train(tmp_path / "run", "task=induction", "debug=fast", check=False)
    assert proc.returncode == 1
    assert "mask=padding is invalid for task=induction" in proc.stderr


def test_task_yamls_state_only_what_differs_from_the_defaults():
    """TaskConfig holds every default once; a task's yaml names the task and what it sets otherwise."""
    import dataclasses

    from omegaconf import OmegaConf

    from conftest import CONFIG_DIR

    yamls = sorted(CONFIG_DIR.glob("task/*.yaml"))
    assert {path.stem for path in yamls} >= {"reverse", "copy", "sort", "next_word", "recall", "induction"}
    for path in yamls:
        stated = OmegaConf.to_container(OmegaConf.load(path))
        assert stated.pop("name") == path.stem  # TaskConfig, the schema of every task yaml, is train_schema's field
        defaults = dataclasses.asdict(TaskConfig(name=path.stem))
        assert set(stated) <= set(defaults), path.name
        restated = {key: value for key, value in stated.items() if value == defaults[key]}
        assert not restated, f"{path.name} restates TaskConfig's defaults: {restated}"


def test_the_docs_list_every_tasks_own_options_with_their_class_defaults():
    """docs/configuration.md's table of the tasks' options says what each task's Options class declares."""
    text = (ROOT / "docs" / "configuration.md").read_text()
    rows = dict(re.findall(r"^\| `(\w+)` \| (`\w+` \(.+?\)(?:, `\w+` \(.+?\))*) \|", text, re.MULTILINE))
    documented = {task: re.findall(r"`(\w+)` \((.+?)\)", cell) for task, cell in rows.items()}
    declared = {name: [(f.name, str(f.default)) for f in dataclasses.fields(cls.Options)]
                for name, cls in TASK_REGISTRY.items() if dataclasses.fields(cls.Options)}
    assert declared and documented == declared
