"""mqar: multi-query associative recall as Zoology generates it (Arora et al. 2023, ``multiquery_ar``). Keys come from
the first half of the vocabulary's words and values from the second, both distinct within an input:
task.options.pairs key-value pairs, then the rest of the task.max_len positions hold <pad> (Zoology's Figure 2: its
token 0, no random words) but for each key asked once, at every other position (slot g, position 2·pairs + 2·g).
Slot g is drawn with weight ∝ (g + 1)^(a − 1), a = task.options.power_a (Zoology's 0.01; 1 = uniform): most queries
come soon after the pairs, a few far. The target at a query is its key's value; everywhere else <pad>, which the
loss and the accuracies ignore. Unlike task=recall, a word cannot be both a key and a value, and the <pad> between
queries makes the distance to the key vary. (Under mask=padding those <pad> are hidden keys; the preset uses
mask=causal, where they are a token like any other.)"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from attention_lab.config import TaskConfig
from attention_lab.data.corpus import PAD_ID, Vocabulary
from attention_lab.data.tasks.base import Pairs, Task, distinct_examples, option, register_task, values_passed_on
from attention_lab.errors import ConfigError


def gap_weights(slots: int, power_a: float) -> list[float]:
    """Zoology's power law over the query slots 0..slots-1: slot g has weight (g + 1)^(a - 1), normalised."""
    weights = [(g + 1) ** (power_a - 1) for g in range(slots)]
    total = sum(weights)
    return [w / total for w in weights]


def draw_slots(weights: list[float], count: int, rng: random.Random) -> list[int]:
    """``count`` distinct slots, each drawn with ``weights`` among those not yet taken (numpy's choice without
    replacement, as Zoology's generator uses)."""
    free, chosen = list(range(len(weights))), []
    for _ in range(count):
        slot = rng.choices(free, weights=[weights[g] for g in free])[0]
        free.remove(slot)
        chosen.append(slot)
    return chosen


@register_task("mqar")
class MqarTask(Task):
    summary = (
        "`task.options.pairs` keys from the first half of the words with values from the second (distinct), then "
        "`<pad>` but for each key asked once at a power-law gap (`task.options.power_a`, Zoology's 0.01; 1 = uniform) "
        "→ each query's value, `<pad>` elsewhere (multi-query associative recall as Zoology's generator builds it; "
        "needs `task.words`)"
    )
    lengths = "`task.max_len` (32)"

    @dataclass
    class Options:
        pairs: int = option(4, help="key–value pairs in each input (each key asked for once after them)")
        power_a: float = option(0.01, help="the gaps' power law: a query g + 1 slots after the pairs has weight "
                                           "∝ (g + 1)^(a − 1) (Zoology's 0.01); 1 = uniform")

    @staticmethod
    def slots(config: TaskConfig, options: MqarTask.Options) -> int:
        """Query slots after the pairs: every other position of the rest of the input."""
        return (config.max_len - 2 * options.pairs) // 2

    @staticmethod
    def halves(word_ids: list[int]) -> tuple[list[int], list[int]]:
        """The key half and the value half of the vocabulary's words (Zoology: ids below and above vocab / 2)."""
        middle = len(word_ids) // 2
        return word_ids[:middle], word_ids[middle:]

    def check(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> None:
        options = self.options_of(config)
        pairs, power_a = options.pairs, options.power_a
        if pairs <= 0:
            raise ConfigError(f"task.options.pairs={pairs} is invalid for task=mqar: it must be a positive integer")
        if not 0 < power_a <= 1:
            raise ConfigError(f"task.options.power_a={power_a} is invalid for task=mqar: it must be a number in (0, 1] "
                              "(Zoology's 0.01: most queries soon after the pairs; 1: uniform)")
        if self.slots(config, options) < pairs:
            raise ConfigError(
                f"task.options.pairs={pairs} is invalid for task=mqar: {pairs} pairs and their {pairs} queries at "
                f"every other position need task.max_len >= {4 * pairs}, and it is {config.max_len}; lower "
                "task.options.pairs or raise task.max_len (and model.context_length)")
        if len(vocab.words) // 2 < pairs:
            raise ConfigError(f"task.options.pairs={pairs} is invalid for task=mqar: keys and values are distinct "
                              f"words from two halves of the vocabulary's {len(vocab.words)} words; raise task.words "
                              f"to at least {2 * pairs} or lower task.options.pairs")

    @classmethod
    def example(cls, word_ids: list[int], config: TaskConfig, options: MqarTask.Options,
                rng: random.Random) -> tuple[list[int], list[int]]:
        key_half, value_half = cls.halves(word_ids)
        keys, values = rng.sample(key_half, options.pairs), rng.sample(value_half, options.pairs)
        context = 2 * options.pairs
        inputs = [word for pair in zip(keys, values, strict=True) for word in pair]
        inputs += [PAD_ID] * (config.max_len - context)  # between the queries: <pad> (Figure 2's zeros)
        targets = [PAD_ID] * config.max_len
        slots = draw_slots(gap_weights(cls.slots(config, options), options.power_a), options.pairs, rng)
        for key, value, slot in zip(keys, values, slots, strict=True):
            inputs[context + 2 * slot], targets[context + 2 * slot] = key, value
        return inputs, targets

    def corrupted(self, inputs: list[int], targets: list[int]) -> tuple[list[int], list[int]]:
        """As recall's: the values passed on one pair (key i gets the value of key i + 1, the last key the first's),
        the keys and the queries kept; the values are distinct, so every query's implied target changes."""
        pairs = sum(target != PAD_ID for target in targets)  # every key is asked once
        return values_passed_on(inputs, targets, pairs)

    def probe(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> list[str]:
        """One input as training draws them (a fixed seed), in words: the pairs, then the queries in the order
        drawn, without the <pad> between them (a probe is words)."""
        word_ids = [vocab.stoi[w] for w in vocab.words]
        inputs, _ = self.example(word_ids, config, self.options_of(config), random.Random(0))
        return [vocab.itos[i] for i in inputs if i != PAD_ID]

    def pairs(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
              rng: random.Random) -> tuple[Pairs, Pairs]:
        self.check(vocab, sentences, config)
        word_ids, options = [vocab.stoi[w] for w in vocab.words], self.options_of(config)
        examples = distinct_examples(lambda: self.example(word_ids, config, options, rng),
                                     config.train_size + config.val_size)
        return examples[config.val_size:], examples[:config.val_size]
