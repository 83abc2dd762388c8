"""The probe per task: with probe=null (the default) each task shows an input of its own that shows its mechanism,
made of the vocabulary's words (a repeated sequence for induction, key-value pairs and queries for recall, a
sentence for the rest); probe=<sentence> overrides it everywhere the probe is used (TensorBoard's maps and
attention tab, visualize.py's default text)."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate
from omegaconf import OmegaConf

from attention_lab.config import TaskConfig, typed
from attention_lab.data.corpus import Vocabulary, read_sentences, tokenize
from attention_lab.data.probe import EXAMPLE_TEXT
from attention_lab.data.tasks import TASK_REGISTRY, build_task
from attention_lab.review.visualize import run_probe, visualize
from conftest import compose_config, run_train

SENTENCES = [tokenize(sentence) for sentence in read_sentences()]


def runnable(task: str) -> list[str]:
    """What ``task`` needs to compose and run: a mask it can be learned with, where the default is not one."""
    cfg = compose_config([f"task={task}"])
    return [] if cfg.mask in cfg.task.masks else [f"mask={cfg.task.masks[0]}"]



def probes_of(overrides: list[str]) -> tuple[list[str], TaskConfig]:
    """The words the configured probe logger shows (in the images and the attention tab), and the task's config."""
    cfg = compose_config(overrides)
    return instantiate(cfg.callbacks.attention_maps).probe_words, typed(TaskConfig, cfg.task)


def shows_its_mechanism(task: TaskConfig, words: list[str]) -> None:
    if task.name == "induction":  # a sequence of distinct words, then the same again: every word repeats
        half = len(words) // 2
        assert len(words) % 2 == 0 and words[:half] == words[half:] and len(set(words[:half])) == half
        assert task.min_len <= len(words) <= task.max_len
    elif task.name == "recall":  # distinct keys, each with a value, then queries that are earlier keys
        options = build_task("recall").options_of(task)
        assert len(words) == 2 * options.pairs + options.queries
        keys, queries = words[0:2 * options.pairs:2], words[2 * options.pairs:]
        assert len(set(keys)) == options.pairs and len(set(queries)) == options.queries and set(queries) <= set(keys)
        assert queries != keys[:options.queries]  # asked in another order than given: a lookup, not a position
    elif task.name == "mqar":  # distinct keys, each with a value, then every key asked once, in the order drawn
        pairs = build_task("mqar").options_of(task).pairs
        keys, queries = words[0:2 * pairs:2], words[2 * pairs:]
        assert len(words) == 3 * pairs and len(set(keys)) == pairs and sorted(queries) == sorted(keys)
    else:  # a sentence: the start of one of the corpus's sentences, as long as training inputs may be
        assert any(sentence[:len(words)] == words for sentence in SENTENCES)
        assert min(task.min_len, len(SENTENCES[0])) <= len(words) <= task.max_len


@pytest.mark.parametrize("task", sorted(TASK_REGISTRY))
def test_each_task_shows_its_own_probe_made_of_its_words(task):
    maps, config = probes_of([f"task={task}", *runnable(task)])
    vocab = Vocabulary.for_task(read_sentences(config.corpus), config.words)
    assert set(maps) <= set(vocab.words)
    shows_its_mechanism(config, maps)


def test_the_probes_differ_where_the_mechanisms_do():
    reverse, induction, recall = (probes_of([f"task={t}", *runnable(t)])[0] for t in ("reverse", "induction", "recall"))
    assert reverse == ["Life", "is", "short", "eat", "dessert", "first"]  # the sentence the README's images show
    assert len({tuple(reverse), tuple(induction), tuple(recall)}) == 3


def test_the_probe_follows_the_tasks_settings():
    """A recall probe has task.options.pairs pairs and task.options.queries queries, also with a larger vocabulary."""
    maps, config = probes_of(["task=recall", "task.options.pairs=6", "task.options.queries=5", "task.words=256"])
    assert config.options == {"pairs": 6, "queries": 5}
    shows_its_mechanism(config, maps)
    maps, config = probes_of(["task=induction", "mask=causal", "task.min_len=4", "task.max_len=8"])
    assert len(maps) == 8
    shows_its_mechanism(config, maps)


@pytest.mark.parametrize("task", sorted(TASK_REGISTRY))
def test_probe_overrides_the_tasks_probe(task):
    maps, _ = probes_of([f"task={task}", *runnable(task), "probe='Your journey starts, with one step'"])
    assert maps == ["Your", "journey", "starts", "with", "one", "step"]


def test_visualize_defaults_to_the_runs_probe():
    recall = compose_config(["task=recall"])
    record = OmegaConf.create(OmegaConf.to_container(recall))  # as a run dir records it: plain data
    assert run_probe(record) == "Life is short eat dessert first Your journey Your dessert"
    record.probe = "Attention Is All You Need"
    assert run_probe(record) == "Attention Is All You Need"
    assert run_probe(OmegaConf.create({"seed": 0})) == EXAMPLE_TEXT  # a record without a task
    record.probe, record.task.corpus = None, "/nonexistent/corpus.txt"
    assert run_probe(record) == EXAMPLE_TEXT  # the corpus is gone: the default text, with a warning


def test_a_trained_run_logs_its_tasks_probe(tmp_path):
    """An induction run's attention tab holds the repeated sequence, and visualize.py shows it without text=."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from attention_lab.records.probe_summary import PROBE_TAG, WordLayout

    run = tmp_path / "run"
    run_train(run, "task=induction", "mask=causal", "max_steps=3", "task.train_size=128", "task.val_size=32",
              "layers=1", "ablation=[]", "~callbacks.head_score_maps", "trainer.val_check_interval=3")
    words = None
    for events in sorted(run.glob("tensorboard/**/events.out.tfevents.*")):
        accumulator = EventAccumulator(str(events), size_guidance={"tensors": 0})
        accumulator.Reload()
        if PROBE_TAG in accumulator.Tags()["tensors"]:
            words = WordLayout.from_content(accumulator.SummaryMetadata(PROBE_TAG).plugin_data.content).key_words
    assert words == "Life is short eat dessert first Life is short eat dessert first".split()
    assert visualize(run, out=tmp_path / "maps")["maps"].words == words
