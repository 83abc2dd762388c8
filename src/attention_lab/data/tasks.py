"""The toy tasks: each turns the corpus into (input, target) word sequences.

copy / reverse / sort: inputs are random word sequences sampled from the vocabulary, lengths in
[min_len, max_len]; the target is the input copied, reversed, or sorted in vocabulary order.
next_word: language modelling: windows of the corpus sentences, target = input shifted by one.
Train and validation sequences never overlap.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import torch

from attention_lab.config import ConfigError
from attention_lab.data.corpus import PAD_ID, Vocabulary, tokenize

Pairs = list[tuple[list[int], list[int]]]

TRANSFORMS: dict[str, Callable[[list[int]], list[int]]] = {
    "copy": lambda ids: list(ids),
    "reverse": lambda ids: ids[::-1],
    "sort": sorted,  # ids are in vocabulary order, so sorting ids sorts the words
}


def sampled_sequences(vocab: Vocabulary, n: int, min_len: int, max_len: int, rng: random.Random) -> list[list[int]]:
    """n distinct random word sequences (ids), lengths uniform in [min_len, max_len]."""
    word_ids = [vocab.stoi[w] for w in vocab.words]
    available = sum(len(word_ids) ** length for length in range(min_len, max_len + 1))
    if available < n:
        raise ConfigError(
            f"task.train_size + task.val_size = {n} is invalid: the corpus's {len(word_ids)} words make only "
            f"{available} distinct sequences of length {min_len}..{max_len}; use a larger corpus, longer lengths or fewer samples"
        )
    seen: set[tuple[int, ...]] = set()
    while len(seen) < n:
        length = rng.randint(min_len, max_len)
        seen.add(tuple(rng.choice(word_ids) for _ in range(length)))
    sequences = [list(s) for s in sorted(seen)]  # sorted, then shuffled: independent of set order
    rng.shuffle(sequences)
    return sequences


def sentence_windows(vocab: Vocabulary, sentences: Sequence[str], min_len: int, max_len: int) -> Pairs:
    """Every window of `length` words inside a sentence, paired with the next `length` words."""
    pairs = []
    for sentence in sentences:
        ids = vocab.encode(tokenize(sentence), warn=False)
        for length in range(min_len, max_len + 1):
            for start in range(len(ids) - length):
                pairs.append((ids[start:start + length], ids[start + 1:start + length + 1]))
    return pairs


def build_pairs(task: str, vocab: Vocabulary, sentences: Sequence[str], *, train_size: int, val_size: int,
                min_len: int, max_len: int, seed: int) -> tuple[Pairs, Pairs]:
    """(train, val) lists of (input ids, target ids), disjoint."""
    rng = random.Random(seed)
    if task == "next_word":
        windows = sentence_windows(vocab, sentences, min_len, max_len)
        if len(windows) < 2:
            raise ConfigError(
                f"task.corpus is too small for task=next_word: {len(windows)} window(s) of {min_len}..{max_len} "
                "words fit in its sentences; add sentences or lower task.min_len"
            )
        rng.shuffle(windows)
        n_val = min(val_size, max(1, len(windows) // 5))
        val, train = windows[:n_val], windows[n_val:]
        # Few distinct windows: repeat them to fill an epoch of train_size examples.
        train = [train[i % len(train)] for i in range(max(train_size, len(train)))]
        return train, val
    transform = TRANSFORMS[task]
    sequences = sampled_sequences(vocab, train_size + val_size, min_len, max_len, rng)
    pairs = [(s, transform(s)) for s in sequences]
    return pairs[val_size:], pairs[:val_size]


def to_tensors(pairs: Pairs, max_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pad to (N, max_len) with PAD_ID; the loss ignores PAD targets."""
    inputs = torch.full((len(pairs), max_len), PAD_ID, dtype=torch.long)
    targets = torch.full((len(pairs), max_len), PAD_ID, dtype=torch.long)
    for row, (src, tgt) in enumerate(pairs):
        inputs[row, :len(src)] = torch.tensor(src)
        targets[row, :len(tgt)] = torch.tensor(tgt)
    return inputs, targets
