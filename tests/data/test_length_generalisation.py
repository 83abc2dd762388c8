"""Length generalisation: task.ood_min_len..task.ood_max_len build a second validation set of longer inputs for
every task, disjoint from training; the settings that cannot work fail naming themselves; the datamodule serves
it as a second validation loader, the module logs it as ood/*, and compare.py keeps those columns."""

from __future__ import annotations

import json
import random

import pytest
import torch

from attention_lab.analysis.tags import is_index_tag
from attention_lab.checks import validate
from attention_lab.config import TaskConfig
from attention_lab.data.corpus import PAD_ID, Vocabulary, read_sentences
from attention_lab.data.datamodule import SentenceTaskDataModule
from attention_lab.data.tasks import build_task
from attention_lab.errors import ConfigError
from attention_lab.review.compare import to_markdown
from attention_lab.review.sweep import collect_sweep
from conftest import compose_config, validated_untrained

SENTENCES = read_sentences()
VOCAB = Vocabulary.from_sentences(SENTENCES)


def config(name: str, **changes) -> TaskConfig:
    values = dict(name=name, min_len=3, max_len=8, train_size=200, val_size=40, ood_min_len=9, ood_max_len=12)
    if name == "induction":
        values.update(min_len=4, max_len=8, ood_min_len=10, ood_max_len=14)
    if name == "recall":
        values.update(max_len=6, ood_min_len=8, ood_max_len=12, options={"pairs": 2, "queries": 2})
    if name == "next_word":  # the built-in sentences have 5 and 6 words: windows of 5 are the longest
        values.update(min_len=2, max_len=4, ood_min_len=5, ood_max_len=5)
    return TaskConfig(**{**values, **changes})


def length(ids: list[int]) -> int:
    return sum(i != PAD_ID for i in ids)


def build(task: TaskConfig):
    builder = build_task(task.name)
    train, val = builder.pairs(VOCAB, SENTENCES, task, random.Random(0))
    return train, val, builder.ood_pairs(VOCAB, SENTENCES, task, random.Random(1))


@pytest.mark.parametrize("name", ["copy", "reverse", "sort", "induction", "recall", "next_word"])
def test_the_longer_set_is_longer_than_anything_trained_on(name):
    task = config(name)
    train, val, ood = build(task)
    assert ood and len(ood) <= task.val_size
    assert max(length(x) for x, _ in train + val) <= task.max_len
    assert all(task.ood_min_len <= length(x) <= task.ood_max_len for x, _ in ood)
    assert not {tuple(x) for x, _ in ood} & {tuple(x) for x, _ in train}


def test_what_the_longer_examples_hold():
    _, _, copies = build(config("copy"))
    assert all(target == inputs for inputs, target in copies)
    _, _, reversed_ = build(config("reverse"))
    assert all(target == inputs[::-1] for inputs, target in reversed_)
    _, _, windows = build(config("next_word"))
    assert all(inputs[1:] == target[:-1] for inputs, target in windows)
    _, _, recall = build(config("recall"))
    for inputs, target in recall:  # 2 queries after 3..5 pairs (8..12 words): the values of their keys
        pairs = (len(inputs) - 2) // 2
        assert pairs in (3, 4, 5)
        values = dict(zip(inputs[0:2 * pairs:2], inputs[1:2 * pairs:2], strict=True))
        assert target[2 * pairs:] == [values[key] for key in inputs[2 * pairs:]]
        assert target[:2 * pairs] == [PAD_ID] * (2 * pairs)


def test_off_by_default_and_turning_it_on_keeps_the_other_data():
    assert build_task("copy").ood_pairs(VOCAB, SENTENCES, config("copy", ood_min_len=None, ood_max_len=None),
                                        random.Random(0)) == []
    off = SentenceTaskDataModule(config("copy", ood_min_len=None, ood_max_len=None), batch_size=16)
    on = SentenceTaskDataModule(config("copy"), batch_size=16)
    off.setup(), on.setup()
    assert off.ood_set is None and not isinstance(off.val_dataloader(), list)
    for a, b in ((off.train_set, on.train_set), (off.val_set, on.val_set)):
        assert all(torch.equal(x, y) for x, y in zip(a.tensors, b.tensors, strict=True))
    val, ood = on.val_dataloader()
    inputs, _ = next(iter(ood))
    assert inputs.shape[1] == 12 and len(ood.dataset) == 40 and val.dataset is on.val_set


@pytest.mark.parametrize(("changes", "setting"), [
    (dict(ood_min_len=8), "task.ood_min_len=8"),  # not longer than task.max_len=8
    (dict(ood_max_len=None), "task.ood_max_len is not set"),
    (dict(ood_min_len=13), "task.ood_min_len=13"),  # above ood_max_len
    (dict(ood_min_len=0), "task.ood_min_len=0"),
])
def test_ranges_that_cannot_work_name_the_setting(changes, setting):
    with pytest.raises(ConfigError, match=setting.replace(".", r"\.")):
        build_task("copy").check_ood(VOCAB, SENTENCES, config("copy", **changes))


def test_tasks_that_cannot_make_the_longer_set_name_the_setting():
    words = len(VOCAB.words)
    too_long = config("induction", ood_min_len=10, ood_max_len=2 * words + 2)  # more distinct words than exist
    with pytest.raises(ConfigError, match=r"task\.ood_max_len"):
        build_task("induction").check_ood(VOCAB, SENTENCES, too_long)
    odd = config("recall", options={"pairs": 2, "queries": 1}, ood_min_len=8, ood_max_len=8)  # 2 * pairs + 1 is never 8
    with pytest.raises(ConfigError, match=r"task\.ood_min_len=8 is invalid for task=recall"):
        build_task("recall").check_ood(VOCAB, SENTENCES, odd)
    with pytest.raises(ConfigError, match=r"task\.ood_min_len"):
        build_task("next_word").check_ood(VOCAB, SENTENCES, config("next_word", ood_min_len=60, ood_max_len=70))


def test_the_config_check_rejects_a_longer_set_than_the_context():
    with pytest.raises(ConfigError, match=r"task\.ood_max_len=20 is invalid.*model\.context_length=16"):
        validate(compose_config(["task.ood_min_len=9", "task.ood_max_len=20"]))
    validate(compose_config(["task.ood_min_len=9", "task.ood_max_len=16"]))


def test_the_module_logs_the_longer_set_as_ood(tmp_path):
    _, module, datamodule, (val, ood) = validated_untrained(
        ["task.ood_min_len=9", "task.ood_max_len=12", "task.train_size=64", "task.val_size=32", "d_model=16"], tmp_path)
    assert {"val/loss", "val/token_acc", "val/seq_acc"} <= set(val)
    # Lightning hands the values logged at the epoch's end (val/loss_by_index/<i>, of the first set) to every set's
    # results; the rest of the longer set's are its own.
    assert {name for name in ood if not is_index_tag(name)} == {"ood/loss", "ood/token_acc", "ood/seq_acc"}
    assert all(name.startswith("val/") for name in ood if is_index_tag(name))
    # The untrained model's loss on the longer set, measured independently.
    inputs, targets = datamodule.ood_set.tensors
    with torch.no_grad():
        logits = module(inputs)
    expected = torch.nn.functional.cross_entropy(logits.transpose(1, 2), targets, ignore_index=PAD_ID)
    assert ood["ood/loss"] == pytest.approx(float(expected), rel=1e-4)


def test_compare_keeps_the_ood_columns_beside_val(tmp_path):
    for job, heads, ood in ((0, 1, 0.25), (1, 2, 0.5)):
        job_dir = tmp_path / str(job)
        (job_dir / ".hydra").mkdir(parents=True)
        (job_dir / ".hydra" / "overrides.yaml").write_text(f"- heads={heads}\n")
        (job_dir / ".hydra" / "config.yaml").write_text("optimized_metric: val/seq_acc\n")
        (job_dir / "run_info.json").write_text(json.dumps({"status": "ok"}))
        (job_dir / "metrics.json").write_text(json.dumps({"val/seq_acc": 1.0, "val/loss": 0.1, "ood/seq_acc": ood,
                                                          "ood/loss": 2.0, "global_step": 10, "params": 5}))
    sweep = collect_sweep(tmp_path)
    assert sweep.metric_names == ["val/seq_acc", "val/loss", "ood/loss", "ood/seq_acc"]
    assert [job.metrics["ood/seq_acc"] for job in sweep.jobs] == [0.25, 0.5]
    table = to_markdown(sweep)
    assert "ood/seq_acc" in table and "0.5000" in table
