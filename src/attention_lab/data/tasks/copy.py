"""copy: output the input sequence unchanged, or, with ``task.options.delay=d``, each word d positions later: a
causal model copying a stream must then find the word d places back by position alone, the lookup that positional
encodings differ in when inputs grow longer than any seen in training."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attention_lab.config import TaskConfig
from attention_lab.data.corpus import PAD_ID, Vocabulary
from attention_lab.data.tasks.base import SequenceTransformTask, option, register_task
from attention_lab.errors import ConfigError


@register_task("copy")
class CopyTask(SequenceTransformTask):
    summary = (
        "random word sequence → itself; with `task.options.delay=d`, each word d positions later (`<pad>` before): "
        "with `mask=causal` a lookup by position"
    )
    lengths = "3–8"

    @dataclass
    class Options:
        delay: int = option(0, help="each word is output this many positions later (0: plain copy; at most "
                                    "`task.min_len` − 1)")

    def head_score_kind(self, config: TaskConfig) -> str | None:
        # each output reads the word `delay` places back: itself, the previous word, or no pattern a kind names
        return {0: "self", 1: "previous_token"}.get(self.options_of(config).delay)

    def check(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> None:
        delay = self.options_of(config).delay
        if not 0 <= delay < config.min_len:
            raise ConfigError(f"task.options.delay={delay} is invalid for task=copy: use 0 (plain copy) up to "
                              f"task.min_len - 1 = {config.min_len - 1}, so that every input has a word to copy")
        super().check(vocab, sentences, config)

    def transform(self, ids: list[int], options: CopyTask.Options) -> list[int]:
        # Nothing to copy yet in the first `delay` positions: <pad>, which the loss and accuracies ignore.
        delay = options.delay
        return [PAD_ID] * delay + ids[: len(ids) - delay]
