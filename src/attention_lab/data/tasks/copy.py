"""copy: output the input sequence unchanged, or, with ``task.delay=d``, each word d positions later: a causal
model copying a stream must then find the word d places back by position alone, the lookup that positional
encodings differ in when inputs grow longer than any seen in training."""

from __future__ import annotations

from collections.abc import Sequence

from attention_lab.config import TaskConfig
from attention_lab.data.corpus import PAD_ID, Vocabulary
from attention_lab.data.tasks.base import SequenceTransformTask, register_task
from attention_lab.errors import ConfigError


@register_task("copy")
class CopyTask(SequenceTransformTask):
    def head_score_kind(self, config: TaskConfig) -> str | None:
        # each output reads the word `delay` places back: itself, the previous word, or no pattern a kind names
        return {0: "self", 1: "previous_token"}.get(config.delay)

    def check(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> None:
        if isinstance(config.delay, bool) or not isinstance(config.delay, int) or not 0 <= config.delay < config.min_len:
            raise ConfigError(f"task.delay={config.delay} is invalid: use 0 (plain copy) up to task.min_len - 1 = "
                              f"{config.min_len - 1}, so that every input has a word to copy")
        super().check(vocab, sentences, config)

    def transform(self, ids: list[int], config: TaskConfig) -> list[int]:
        # Nothing to copy yet in the first `delay` positions: <pad>, which the loss and accuracies ignore.
        return [PAD_ID] * config.delay + ids[: len(ids) - config.delay]
