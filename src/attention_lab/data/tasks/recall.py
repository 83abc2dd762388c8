"""recall: multi-query associative recall (Arora et al. 2023, *Zoology*). The input is task.options.pairs key-value
word pairs (distinct keys, any values), then task.options.queries of those keys again, in random order. The target at
each query is that key's value; everywhere else it is <pad>, which the loss and the accuracies ignore. Solving
it needs a lookup by content: find the earlier occurrence of the query and read the word after it.
Its longer inputs (task.ood_min_len..task.ood_max_len) have more pairs and the same number of queries."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from attention_lab.config import TaskConfig
from attention_lab.data.corpus import PAD_ID, Vocabulary
from attention_lab.data.tasks.base import (
    Pairs,
    Task,
    check_ood_range,
    corpus_words,
    distinct_examples,
    option,
    register_task,
    values_passed_on,
)
from attention_lab.errors import ConfigError


@register_task("recall")
class RecallTask(Task):
    summary = (
        "`task.options.pairs` key–value word pairs (distinct keys), then `task.options.queries` of the keys → each "
        "query's value, `<pad>` elsewhere (multi-query associative recall, Arora et al. 2023, *Zoology*)"
    )
    lengths = "2 · pairs + queries (10)"

    @dataclass
    class Options:
        pairs: int = option(4, help="key–value pairs in each input")
        queries: int = option(2, help="keys asked for after the pairs (at most `pairs`)")

    def head_score_kind(self, config: TaskConfig) -> str:
        return "induction"  # a query reads the word after its key's earlier occurrence: the induction pattern

    @staticmethod
    def length(options: RecallTask.Options) -> int:
        return 2 * options.pairs + options.queries

    @staticmethod
    def available(words: int, options: RecallTask.Options) -> int:
        """Distinct inputs: ordered distinct keys x any values x ordered distinct queries."""
        return math.perm(words, options.pairs) * words**options.pairs * math.perm(options.pairs, options.queries)

    def check(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> None:
        options = self.options_of(config)
        pairs, queries = options.pairs, options.queries
        for key, value in (("pairs", pairs), ("queries", queries)):
            if value <= 0:
                raise ConfigError(f"task.options.{key}={value} is invalid for task=recall: it must be a positive "
                                  "integer")
        if queries > pairs:
            raise ConfigError(f"task.options.queries={queries} is invalid for task=recall: only task.options.pairs="
                              f"{pairs} keys can be asked for; lower task.options.queries or raise task.options.pairs")
        if self.length(options) > config.max_len:
            raise ConfigError(
                f"task.options.pairs={pairs} is invalid for task=recall: {pairs} pairs and task.options.queries="
                f"{queries} make inputs of {self.length(options)} words, longer than task.max_len={config.max_len}; "
                "lower task.options.pairs or task.options.queries, or raise task.max_len (and model.context_length)")
        words = len(vocab.words)
        if words < pairs:
            raise ConfigError(f"task.options.pairs={pairs} is invalid for task=recall: the keys must be distinct and "
                              f"task.corpus has only {words} distinct words; lower task.options.pairs or use a larger "
                              "corpus")
        n, available = config.train_size + config.val_size, self.available(words, options)
        if available < n:
            raise ConfigError(
                f"task.train_size + task.val_size = {n} is invalid for task=recall: the corpus's {words} words make "
                f"only {available} distinct inputs of task.options.pairs={pairs}; raise task.options.pairs or use "
                "fewer samples")

    @staticmethod
    def example(word_ids: list[int], options: RecallTask.Options, rng: random.Random) -> tuple[list[int], list[int]]:
        keys = rng.sample(word_ids, options.pairs)
        values = [rng.choice(word_ids) for _ in keys]
        asked = rng.sample(range(options.pairs), options.queries)
        inputs = [word for pair in zip(keys, values, strict=True) for word in pair] + [keys[i] for i in asked]
        targets = [PAD_ID] * (2 * options.pairs) + [values[i] for i in asked]
        return inputs, targets

    def corrupted(self, inputs: list[int], targets: list[int]) -> tuple[list[int], list[int]]:
        """The values passed on one pair (key i gets the value of key i + 1, the last key the first's), the keys and
        the queries kept: a query's implied target is its key's new value. Values may repeat, so a query whose key
        got an equal value keeps its target (the metric leaves it out)."""
        pairs = next(t for t, target in enumerate(targets) if target != PAD_ID) // 2  # the queries follow the pairs
        return values_passed_on(inputs, targets, pairs)

    def probe(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> list[str]:
        """task.options.pairs key-value pairs from the corpus's words in order (keys distinct), then
        task.options.queries of the keys, the last pair's first: each query must find its key earlier in the input
        and read the word after it."""
        options = self.options_of(config)
        words = corpus_words(sentences)
        if len(words) >= 2 * options.pairs:
            keys, values = words[0:2 * options.pairs:2], words[1:2 * options.pairs:2]
        else:  # a small corpus: every word a key, the values the same words backwards
            keys = words[:options.pairs]
            values = keys[::-1]
        return [word for pair in zip(keys, values, strict=True) for word in pair] + keys[::-1][:options.queries]

    def pairs(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
              rng: random.Random) -> tuple[Pairs, Pairs]:
        self.check(vocab, sentences, config)
        word_ids, options = [vocab.stoi[w] for w in vocab.words], self.options_of(config)
        examples = distinct_examples(lambda: self.example(word_ids, options, rng), config.train_size + config.val_size)
        return examples[config.val_size:], examples[:config.val_size]

    def ood_options(self, config: TaskConfig) -> list[RecallTask.Options]:
        """The options of each number of pairs whose inputs fit task.ood_min_len..task.ood_max_len."""
        if not check_ood_range(config):
            return []
        options = self.options_of(config)
        longer = [dataclasses.replace(options, pairs=pairs) for pairs in range(options.pairs + 1, config.ood_max_len)
                  if config.ood_min_len <= 2 * pairs + options.queries <= config.ood_max_len]
        if not longer:
            raise ConfigError(
                f"task.ood_min_len={config.ood_min_len} is invalid for task=recall: a longer input has more pairs, "
                f"2 * pairs + task.options.queries={options.queries} words, and none of those lengths lies in "
                f"{config.ood_min_len}..{config.ood_max_len}; widen task.ood_min_len..task.ood_max_len")
        return longer

    def check_ood(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> None:
        longer = self.ood_options(config)
        if longer and len(vocab.words) < longer[0].pairs:
            raise ConfigError(f"task.ood_min_len={config.ood_min_len} is invalid for task=recall: its inputs need "
                              f"{longer[0].pairs} distinct keys and task.corpus has only {len(vocab.words)} words; "
                              "lower task.ood_min_len or use a larger corpus")

    def ood_pairs(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
                  rng: random.Random) -> Pairs:
        self.check_ood(vocab, sentences, config)
        longer = [c for c in self.ood_options(config) if c.pairs <= len(vocab.words)]
        word_ids = [vocab.stoi[w] for w in vocab.words]
        available = sum(self.available(len(word_ids), c) for c in longer)
        return distinct_examples(lambda: self.example(word_ids, rng.choice(longer), rng),
                                 min(config.val_size, available))
