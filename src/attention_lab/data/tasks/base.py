"""What a task is: (input ids, target ids) pairs for training and validation, train and val disjoint."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from attention_lab.config import TaskConfig
from attention_lab.data.corpus import Vocabulary
from attention_lab.errors import ConfigError

Pairs = list[tuple[list[int], list[int]]]
TASK_REGISTRY: dict[str, type[Task]] = {}


def register_task(name: str) -> Callable[[type[Task]], type[Task]]:
    def decorator(cls: type[Task]) -> type[Task]:
        cls.name = name
        TASK_REGISTRY[name] = cls
        return cls

    return decorator


class Task:
    name = ""

    def check(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> None:
        """Raise ConfigError when the corpus cannot give the requested data (cheap: builds nothing)."""

    def pairs(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
              rng: random.Random) -> tuple[Pairs, Pairs]:
        raise NotImplementedError


class SequenceTransformTask(Task):
    """Random word sequences of the vocabulary, lengths uniform in [min_len, max_len]; the target is a
    function of the input (copy, reverse, sort)."""

    def transform(self, ids: list[int]) -> list[int]:
        raise NotImplementedError

    @staticmethod
    def available(vocab: Vocabulary, config: TaskConfig) -> int:
        words = len(vocab.words)
        return sum(words**length for length in range(config.min_len, config.max_len + 1))

    def check(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> None:
        n, available = config.train_size + config.val_size, self.available(vocab, config)
        if available < n:
            raise ConfigError(
                f"task.train_size + task.val_size = {n} is invalid: the corpus's {len(vocab.words)} words make only "
                f"{available} distinct sequences of length {config.min_len}..{config.max_len}; use a larger corpus, "
                "longer lengths or fewer samples")

    def pairs(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
              rng: random.Random) -> tuple[Pairs, Pairs]:
        self.check(vocab, sentences, config)
        word_ids = [vocab.stoi[w] for w in vocab.words]
        seen: set[tuple[int, ...]] = set()
        while len(seen) < config.train_size + config.val_size:
            length = rng.randint(config.min_len, config.max_len)
            seen.add(tuple(rng.choice(word_ids) for _ in range(length)))
        sequences = [list(s) for s in sorted(seen)]  # sorted, then shuffled: independent of set order
        rng.shuffle(sequences)
        pairs = [(s, self.transform(s)) for s in sequences]
        return pairs[config.val_size:], pairs[:config.val_size]
