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

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from attention_lab.config import TaskConfig
from attention_lab.data.corpus import PAD_ID, Vocabulary
from attention_lab.data.tasks.base import Pairs, Task, option, register_task, values_passed_on
from attention_lab.errors import ConfigError

if TYPE_CHECKING:
    from attention_lab.data.mqar_draws import MqarShape
    from attention_lab.data.tensors import Examples


def gap_weights(slots: int, power_a: float) -> list[float]:
    """Zoology's power law over the query slots 0..slots-1: slot g has weight (g + 1)^(a - 1), normalised."""
    weights = [(g + 1) ** (power_a - 1) for g in range(slots)]
    total = sum(weights)
    return [w / total for w in weights]


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
        key_half, value_half = self.halves(list(vocab.words))
        available = (math.perm(len(key_half), pairs) * math.perm(len(value_half), pairs)
                     * math.perm(self.slots(config, options), pairs))
        if available < config.val_size + (1 if config.train_size else 0):
            raise ConfigError(
                f"task.val_size={config.val_size} is invalid for task=mqar: its words, pairs and slots make only "
                f"{available} distinct inputs, the validation inputs are distinct and no training input may be one of "
                "them; lower task.val_size or raise task.words or task.max_len")

    @classmethod
    def shape(cls, vocab: Vocabulary, config: TaskConfig) -> MqarShape:
        """What the generator (:mod:`attention_lab.data.mqar_draws`, torch) needs to draw the task's inputs."""
        import torch

        from attention_lab.data.mqar_draws import MqarShape

        options = cls.options_of(config)
        key_half, value_half = cls.halves([vocab.stoi[w] for w in vocab.words])
        weights = torch.tensor(gap_weights(cls.slots(config, options), options.power_a), dtype=torch.float64)
        return MqarShape(torch.tensor(key_half), torch.tensor(value_half), options.pairs, config.max_len, weights)

    def corrupted(self, inputs: list[int], targets: list[int]) -> tuple[list[int], list[int]]:
        """As recall's: the values passed on one pair (key i gets the value of key i + 1, the last key the first's),
        the keys and the queries kept; the values are distinct, so every query's implied target changes."""
        pairs = sum(target != PAD_ID for target in targets)  # every key is asked once
        return values_passed_on(inputs, targets, pairs)

    def probe(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> list[str]:
        """One input as training draws them (a fixed seed), in words: the pairs, then the queries in the order
        drawn, without the <pad> between them (a probe is words)."""
        from attention_lab.data.mqar_draws import draw, seeded

        self.check(vocab, sentences, config)
        inputs, _ = draw(self.shape(vocab, config), 1, seeded(0))
        return [vocab.itos[i] for i in inputs[0].tolist() if i != PAD_ID]

    def tensors(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
                rng: random.Random) -> tuple[Examples, Examples]:
        """Drawn as tensors, all at once (:mod:`attention_lab.data.mqar_draws`): a run of fresh inputs at every step
        has hundreds of thousands."""
        from attention_lab.data.mqar_draws import draw_sets

        self.check(vocab, sentences, config)
        return draw_sets(self.shape(vocab, config), config.train_size, config.val_size, rng)

    def pairs(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
              rng: random.Random) -> tuple[Pairs, Pairs]:
        """:meth:`tensors` as lists (the longer validation set, and tests, read them so)."""
        train, val = self.tensors(vocab, sentences, config, rng)
        return as_pairs(train), as_pairs(val)


def as_pairs(examples: Examples) -> Pairs:
    inputs, targets = examples
    return list(zip(inputs.tolist(), targets.tolist(), strict=True))
