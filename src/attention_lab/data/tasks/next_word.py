"""next_word: language modelling on the corpus's sentences: every window of words, target = the window
shifted by one word. A fifth of the windows (at most val_size) are held out for validation. The longer set
(task.ood_min_len..task.ood_max_len) is up to task.val_size windows of those lengths."""

from __future__ import annotations

import random
from collections.abc import Sequence

from attention_lab.config import TaskConfig
from attention_lab.data.corpus import Vocabulary, tokenize
from attention_lab.data.tasks.base import Pairs, Task, check_ood_range, ood_config, ood_names, register_task
from attention_lab.errors import ConfigError


@register_task("next_word")
class NextWordTask(Task):
    summary = "window of a corpus sentence → the window shifted by one word (needs `mask=causal`)"
    lengths = "2–5"

    @staticmethod
    def windows(vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> Pairs:
        pairs = []
        for sentence in sentences:
            ids = vocab.encode(tokenize(sentence), warn=False)
            for length in range(config.min_len, config.max_len + 1):
                for start in range(len(ids) - length):
                    pairs.append((ids[start:start + length], ids[start + 1:start + length + 1]))
        return pairs

    def check(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> None:
        self.enough(len(self.windows(vocab, sentences, config)), config)

    @staticmethod
    def enough(found: int, config: TaskConfig) -> None:
        if found < 2:
            raise ConfigError(
                f"task.corpus is too small for task=next_word: {found} window(s) of {config.min_len}..{config.max_len} "
                "words fit in its sentences; add sentences or lower task.min_len")

    def pairs(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
              rng: random.Random) -> tuple[Pairs, Pairs]:
        windows = self.windows(vocab, sentences, config)
        self.enough(len(windows), config)
        rng.shuffle(windows)
        n_val = min(config.val_size, max(1, len(windows) // 5))
        val, train = windows[:n_val], windows[n_val:]
        # Few distinct windows: repeat them to fill an epoch of train_size examples.
        return [train[i % len(train)] for i in range(max(config.train_size, len(train)))], val

    def ood_pairs(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
                  rng: random.Random) -> Pairs:
        if not check_ood_range(config):
            return []
        with ood_names():
            windows = self.windows(vocab, sentences, ood_config(config))
            self.enough(len(windows), ood_config(config))
        rng.shuffle(windows)
        return windows[:config.val_size]
