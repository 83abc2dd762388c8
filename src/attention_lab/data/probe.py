"""The probe: the words whose attention a run shows (TensorBoard's maps and attention tab, ``visualize.py``'s
default text). ``probe=<sentence>`` chooses them; ``probe=null`` (the default) takes the task's own, an input
that shows the task's mechanism (:meth:`attention_lab.data.tasks.base.Task.probe`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from attention_lab.config import TaskConfig, typed
from attention_lab.data.corpus import BOS, UNK, Vocabulary, read_sentences
from attention_lab.data.tasks import build_task

# Chapter 3's sentence: visualize.py's text for a run record without a task, and the end-of-run note's example.
EXAMPLE_TEXT = "Your journey starts with one step"


def example_text(task_name: str) -> str:
    """The end-of-run note's example sentence for a run of task ``task_name``: EXAMPLE_TEXT in the shape of the
    task's inputs (task=induction: a sequence and its repeat, where its model predicts)."""
    return " ".join(build_task(task_name).example_words(EXAMPLE_TEXT.split()))


def task_probe(probe: str | None, task: TaskConfig | Mapping[str, Any]) -> str:
    """``probe`` when given, else the task's probe as a sentence (its words joined by spaces)."""
    if probe is not None:
        return probe
    config = task if isinstance(task, TaskConfig) else typed(TaskConfig, task)
    sentences = read_sentences(config.corpus)
    vocab = Vocabulary.for_task(sentences, config.words)
    return " ".join(build_task(config.name).probe(vocab, sentences, config))


def with_first_token(words: Sequence[str], vocab: Sequence[str]) -> list[str]:
    """A probe's words as the model reads them: after <bos> when the run's inputs start with it (task.bos=true)."""
    words = list(words)
    return [BOS, *words] if BOS in vocab and words[:1] != [BOS] else words


def probe_axes(words: Sequence[str], vocab: Sequence[str], encoder_decoder: bool) -> tuple[list[str], list[str]]:
    """A probe's words as a model reads them (unknown ones as <unk>), for the axes of its maps: (queries, keys).
    An encoder-decoder's queries are its output positions."""
    keys = [w if w in vocab else UNK for w in words]
    return [f"out{i}" for i in range(len(keys))] if encoder_decoder else keys, keys
