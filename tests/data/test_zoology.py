"""Zoology's recall gap (Arora et al. 2023): the larger vocabulary of task.words, the experiment=zoology preset,
and a short version of it in which attention solves recall and a gated convolution of the same width does not."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hydra import compose

from attention_lab.checks import validate
from attention_lab.config import TaskConfig
from attention_lab.data.corpus import Vocabulary, read_sentences, tokenize
from attention_lab.data.tasks import build_task
from attention_lab.errors import ConfigError
from attention_lab.run.overrides import hydra_compose_api
from attention_lab.run.sweep_jobs import planned_jobs, sweep_arguments, sweep_job_configs
from conftest import CONFIG_DIR, ROOT, run_in_process, run_train

SENTENCES = read_sentences(None)
CORPUS_WORDS = sorted(set(word for sentence in SENTENCES for word in tokenize(sentence)))


def test_task_words_adds_numbered_words_to_the_corpus():
    assert Vocabulary.for_task(SENTENCES).itos == Vocabulary.from_sentences(SENTENCES).itos  # off by default
    vocab = Vocabulary.for_task(SENTENCES, 40)
    assert len(CORPUS_WORDS) == 17 and len(vocab.words) == 40
    assert set(vocab.words) == set(CORPUS_WORDS) | {f"w{n}" for n in range(23)}
    assert vocab.itos[:2] == ["<pad>", "<unk>"] and vocab.words == sorted(vocab.words)
    assert Vocabulary.for_task(SENTENCES, 17).itos == Vocabulary.from_sentences(SENTENCES).itos


@pytest.mark.parametrize("words", [16, 0, 2**16 + 1, True])
def test_task_words_below_the_corpus_or_absurd_is_one_line(words):
    with pytest.raises(ConfigError) as err:
        Vocabulary.for_task(SENTENCES, words)
    assert f"task.words={words}" in str(err.value) and "\n" not in str(err.value)


def test_recall_draws_its_keys_and_values_from_every_word():
    config = TaskConfig(name="recall", words=256, max_len=18, train_size=2000, val_size=200,
                        options={"pairs": 6, "queries": 6})
    vocab = Vocabulary.for_task(SENTENCES, 256)
    train, val = build_task("recall").pairs(vocab, SENTENCES, config, random.Random(0))
    used = {token for inputs, _ in train + val for token in inputs}
    assert len(used) > 200 and used <= set(range(2, len(vocab)))


def test_the_preset_is_four_mixers_at_four_widths_over_three_seeds():
    with hydra_compose_api(CONFIG_DIR):
        sweep = compose("train", overrides=["experiment=zoology"], return_hydra_config=True)
        configs = sweep_job_configs(["experiment=zoology", "seed=0"], "train", validate)  # no rule reads the seed
    jobs = planned_jobs(sweep_arguments(sweep, []))  # the jobs the sweeper launches
    assert {tuple(sorted(job)) for job in jobs} == {
        (f"d_model={d}", f"model={m}", f"seed={s}") for m in ("multihead", "linear", "sigmoid", "conv")
        for d in (16, 32, 64, 128) for s in (0, 1, 2)} and len(jobs) == 48
    assert {(c.model.name, c.d_model, c.seed) for c in configs} == {
        (m, d, 0) for m in ("multihead", "linear", "sigmoid", "conv") for d in (16, 32, 64, 128)}
    for config in configs:  # the same task and the same budget for every job
        assert (config.task.name, config.task.words, config.task.options) == ("recall", 256, {"pairs": 6, "queries": 6})
        assert (config.mask, config.max_steps, config.lr, config.heads) == ("causal", 800, 0.003, 4)


def metrics(job: Path) -> dict:
    return json.loads((job / "metrics.json").read_text())


def test_a_two_step_race_writes_what_plot_sweep_reads(tmp_path):
    """The short race's code path in `make test`: the preset's jobs train, record, and plot_sweep reads them."""
    sweep = tmp_path / "zoology"
    run_train(sweep, "experiment=zoology", "model=multihead,conv", "d_model=16", "seed=1", "max_steps=2",
              "task.train_size=128", "task.val_size=64", "callbacks.attention_maps.images=false",
              "~callbacks.head_score_maps", "ablation=[]", multirun=True)
    attention, conv = metrics(sweep / "0"), metrics(sweep / "1")
    assert (attention["hparams"]["model"], conv["hparams"]["model"]) == ("multihead", "conv")
    assert 0 <= attention["val/token_acc"] <= 1 and 0 <= conv["val/token_acc"] <= 1
    run_in_process(ROOT / "scripts" / "plot_sweep.py", str(sweep), "--out", str(tmp_path / "plot"), check=True)
    (table,) = (tmp_path / "plot").glob("*.md")
    assert "multihead" in table.read_text() and "conv" in table.read_text()


@pytest.mark.slow  # a seed race of 800-step runs; tests/data/test_zoology.py's two-step race keeps its path in `make test`
def test_attention_solves_recall_where_a_gated_convolution_of_the_same_width_does_not(tmp_path, single_thread):
    sweep = tmp_path / "zoology"
    run_train(sweep, "experiment=zoology", "model=multihead,conv", "d_model=32", "seed=1",
              "callbacks.attention_maps.images=false", "~callbacks.head_score_maps", multirun=True)
    attention, conv = metrics(sweep / "0"), metrics(sweep / "1")
    assert (attention["hparams"]["model"], conv["hparams"]["model"]) == ("multihead", "conv")
    assert attention["val/token_acc"] >= 0.9 and conv["val/token_acc"] <= 0.5, (attention, conv)
