"""induction: a random sequence of distinct words, then the same sequence again. At each position of the
repeat the target is the next word, which the first occurrence gives: find the earlier copy of the current word
and read the word after it, the two-layer "induction head" circuit (Olsson et al. 2022). Every other target is
<pad>, which the loss and the accuracies ignore. Needs mask=causal, or the next word is in plain view.
task.min_len and task.max_len bound the whole input (sequence and repeat), so the sequence has
ceil(task.min_len / 2) (at least 2) to task.max_len // 2 words."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from attention_lab.config import TaskConfig
from attention_lab.data.corpus import PAD_ID, Vocabulary
from attention_lab.data.tasks.base import Pairs, Task, corpus_words, first_sentence, register_task
from attention_lab.errors import ConfigError


@register_task("induction")
class InductionTask(Task):
    summary = (
        "a sequence of distinct words, then its repeat → the next word at each position of the repeat, `<pad>` "
        "elsewhere (the induction-head task, Olsson et al. 2022; needs `mask=causal`)"
    )
    lengths = "6–16 (sequence of 3–8)"

    def head_score_kind(self, config: TaskConfig) -> str:
        return "induction"

    @staticmethod
    def sequence_lengths(config: TaskConfig) -> range:
        """Words in the random sequence: each input holds it twice."""
        return range(max(2, math.ceil(config.min_len / 2)), config.max_len // 2 + 1)

    def check(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> None:
        lengths, words = self.sequence_lengths(config), len(vocab.words)
        if config.max_len < 4:
            raise ConfigError(f"task.max_len={config.max_len} is invalid for task=induction: an input is a sequence "
                              "of at least 2 words and its repeat, so task.max_len must be at least 4")
        if not lengths:
            raise ConfigError(f"task.min_len={config.min_len} is invalid for task=induction: an input is a sequence "
                              f"and its repeat, so its length is even; no even length lies in {config.min_len}.."
                              f"{config.max_len}; lower task.min_len or raise task.max_len")
        if words < lengths[-1]:
            raise ConfigError(f"task.max_len={config.max_len} is invalid for task=induction: a sequence of "
                              f"{lengths[-1]} distinct words needs {lengths[-1]} words and task.corpus has only "
                              f"{words}; lower task.max_len or use a larger corpus")
        n, available = config.train_size + config.val_size, sum(math.perm(words, k) for k in lengths)
        if available < n:
            raise ConfigError(
                f"task.train_size + task.val_size = {n} is invalid for task=induction: the corpus's {words} words "
                f"make only {available} distinct inputs of length {config.min_len}..{config.max_len}; use a larger "
                "corpus, longer lengths or fewer samples")

    @staticmethod
    def example(sequence: list[int]) -> tuple[list[int], list[int]]:
        # Position t of the repeat holds sequence[t - k]; its target is sequence[t - k + 1]. The last word of the
        # repeat has no next word, and nothing in the first copy says what comes next.
        k = len(sequence)
        return sequence + sequence, [PAD_ID] * k + sequence[1:] + [PAD_ID]

    def corrupted(self, inputs: list[int], targets: list[int]) -> tuple[list[int], list[int]]:
        """The first copy reversed, the repeat kept: the same words, so only their order, what an induction head
        copies, changes. The repeat's word sequence[j] now follows sequence[j + 1] in the first copy, so the word
        after its earlier occurrence is sequence[j - 1] (for j = 0, the last word of the first copy, the repeat's
        own first word); every target of the repeat is implied otherwise than it is."""
        k = len(inputs) // 2
        sequence = inputs[:k]
        corrupted = sequence[::-1] + inputs[k:]
        implied = [PAD_ID if target == PAD_ID else corrupted[corrupted.index(corrupted[t]) + 1]
                   for t, target in enumerate(targets)]
        return corrupted, implied

    def probe(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> list[str]:
        """A sequence and its repeat: the first sentence's distinct words (more of the corpus's when it has too few
        for the shortest sequence, fewer when too many for the longest), twice."""
        lengths = self.sequence_lengths(config)
        first = len(dict.fromkeys(first_sentence(sentences)))
        sequence = corpus_words(sentences)[:min(max(first, lengths[0]), lengths[-1])]
        return sequence + sequence

    def example_words(self, words: list[str]) -> list[str]:
        """A sequence and its repeat, as the task's inputs are: the first half of ``words`` (at least 2), twice."""
        sequence = words[:max(2, len(words) // 2)]
        return sequence + sequence

    def pairs(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
              rng: random.Random) -> tuple[Pairs, Pairs]:
        self.check(vocab, sentences, config)
        word_ids, lengths = [vocab.stoi[w] for w in vocab.words], self.sequence_lengths(config)
        sequences: list[list[int]] = []
        seen: set[tuple[int, ...]] = set()
        while len(sequences) < config.train_size + config.val_size:  # distinct inputs: train and val disjoint
            sequence = rng.sample(word_ids, rng.choice(lengths))
            if tuple(sequence) not in seen:
                seen.add(tuple(sequence))
                sequences.append(sequence)
        examples = [self.example(s) for s in sequences]
        return examples[config.val_size:], examples[:config.val_size]
