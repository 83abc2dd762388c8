"""recall: multi-query associative recall (Arora et al. 2023, *Zoology*). The input is task.pairs key-value
word pairs (distinct keys, any values), then task.queries of those keys again, in random order. The target at
each query is that key's value; everywhere else it is <pad>, which the loss and the accuracies ignore. Solving
it needs a lookup by content: find the earlier occurrence of the query and read the word after it.
Its longer inputs (task.ood_min_len..task.ood_max_len) have more pairs and the same number of queries."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence

from attention_lab.config import TaskConfig
from attention_lab.data.corpus import PAD_ID, Vocabulary
from attention_lab.data.tasks.base import (
    Pairs,
    Task,
    check_ood_range,
    corpus_words,
    distinct_examples,
    register_task,
    values_passed_on,
)
from attention_lab.errors import ConfigError


@register_task("recall")
class RecallTask(Task):
    def head_score_kind(self, config: TaskConfig) -> str:
        return "induction"  # a query reads the word after its key's earlier occurrence: the induction pattern

    @staticmethod
    def length(config: TaskConfig) -> int:
        return 2 * config.pairs + config.queries

    @staticmethod
    def available(words: int, config: TaskConfig) -> int:
        """Distinct inputs: ordered distinct keys x any values x ordered distinct queries."""
        return math.perm(words, config.pairs) * words**config.pairs * math.perm(config.pairs, config.queries)

    def check(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> None:
        for key in ("pairs", "queries"):
            value = getattr(config, key)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"task.{key}={value} is invalid for task=recall: it must be a positive integer")
        if config.queries > config.pairs:
            raise ConfigError(f"task.queries={config.queries} is invalid for task=recall: only task.pairs="
                              f"{config.pairs} keys can be asked for; lower task.queries or raise task.pairs")
        if self.length(config) > config.max_len:
            raise ConfigError(
                f"task.pairs={config.pairs} is invalid for task=recall: {config.pairs} pairs and task.queries="
                f"{config.queries} make inputs of {self.length(config)} words, longer than task.max_len="
                f"{config.max_len}; lower task.pairs or task.queries, or raise task.max_len (and model.context_length)")
        words = len(vocab.words)
        if words < config.pairs:
            raise ConfigError(f"task.pairs={config.pairs} is invalid for task=recall: the keys must be distinct and "
                              f"task.corpus has only {words} distinct words; lower task.pairs or use a larger corpus")
        n, available = config.train_size + config.val_size, self.available(words, config)
        if available < n:
            raise ConfigError(
                f"task.train_size + task.val_size = {n} is invalid for task=recall: the corpus's {words} words make "
                f"only {available} distinct inputs of task.pairs={config.pairs}; raise task.pairs or use fewer samples")

    @staticmethod
    def example(word_ids: list[int], config: TaskConfig, rng: random.Random) -> tuple[list[int], list[int]]:
        keys = rng.sample(word_ids, config.pairs)
        values = [rng.choice(word_ids) for _ in keys]
        asked = rng.sample(range(config.pairs), config.queries)
        inputs = [word for pair in zip(keys, values, strict=True) for word in pair] + [keys[i] for i in asked]
        targets = [PAD_ID] * (2 * config.pairs) + [values[i] for i in asked]
        return inputs, targets

    def corrupted(self, inputs: list[int], targets: list[int]) -> tuple[list[int], list[int]]:
        """The values passed on one pair (key i gets the value of key i + 1, the last key the first's), the keys and
        the queries kept: a query's implied target is its key's new value. Values may repeat, so a query whose key
        got an equal value keeps its target (the metric leaves it out)."""
        pairs = next(t for t, target in enumerate(targets) if target != PAD_ID) // 2  # the queries follow the pairs
        return values_passed_on(inputs, targets, pairs)

    def probe(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> list[str]:
        """task.pairs key-value pairs from the corpus's words in order (keys distinct), then task.queries of the keys,
        the last pair's first: each query must find its key earlier in the input and read the word after it."""
        words = corpus_words(sentences)
        if len(words) >= 2 * config.pairs:
            keys, values = words[0:2 * config.pairs:2], words[1:2 * config.pairs:2]
        else:  # a small corpus: every word a key, the values the same words backwards
            keys = words[:config.pairs]
            values = keys[::-1]
        return [word for pair in zip(keys, values, strict=True) for word in pair] + keys[::-1][:config.queries]

    def pairs(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
              rng: random.Random) -> tuple[Pairs, Pairs]:
        self.check(vocab, sentences, config)
        word_ids = [vocab.stoi[w] for w in vocab.words]
        examples = distinct_examples(lambda: self.example(word_ids, config, rng), config.train_size + config.val_size)
        return examples[config.val_size:], examples[:config.val_size]

    @staticmethod
    def ood_configs(config: TaskConfig) -> list[TaskConfig]:
        """One config per number of pairs whose inputs fit task.ood_min_len..task.ood_max_len."""
        if not check_ood_range(config):
            return []
        longer = [dataclasses.replace(config, pairs=pairs, max_len=config.ood_max_len, train_size=0)
                  for pairs in range(config.pairs + 1, config.ood_max_len)
                  if config.ood_min_len <= 2 * pairs + config.queries <= config.ood_max_len]
        if not longer:
            raise ConfigError(
                f"task.ood_min_len={config.ood_min_len} is invalid for task=recall: a longer input has more pairs, "
                f"2 * pairs + task.queries={config.queries} words, and none of those lengths lies in "
                f"{config.ood_min_len}..{config.ood_max_len}; widen task.ood_min_len..task.ood_max_len")
        return longer

    def check_ood(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> None:
        longer = self.ood_configs(config)
        if longer and len(vocab.words) < longer[0].pairs:
            raise ConfigError(f"task.ood_min_len={config.ood_min_len} is invalid for task=recall: its inputs need "
                              f"{longer[0].pairs} distinct keys and task.corpus has only {len(vocab.words)} words; "
                              "lower task.ood_min_len or use a larger corpus")

    def ood_pairs(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
                  rng: random.Random) -> Pairs:
        self.check_ood(vocab, sentences, config)
        longer = [c for c in self.ood_configs(config) if c.pairs <= len(vocab.words)]
        word_ids = [vocab.stoi[w] for w in vocab.words]
        available = sum(self.available(len(word_ids), c) for c in longer)
        return distinct_examples(lambda: self.example(word_ids, rng.choice(longer), rng),
                                 min(config.val_size, available))
