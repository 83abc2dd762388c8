"""The probe of Olsson et al.'s (2022) prefix-matching score: random words repeated, the repeat starting at a random
point of the words and wrapping around, so that the distance back to a word's earlier copy differs from row to row.

Prefix matching is the attention from a token of the repeat to the token right after its earlier occurrence (the
``induction`` pattern of :mod:`attention_lab.analysis.head_scores`). Measured on such a probe rather than on the
task's inputs, it asks whether a head matches prefixes in any text: the probe is the same for every task, drawn
once from the vocabulary's words with a fixed seed, so runs of different tasks and seeds are scored on one input.

Why the repeat is rotated: were every row a sequence and its repeat in order (``A B C D A B C D``), a head that
attends a fixed distance back, by position alone, would score 1 without reading a word. Here a row of k words
``A B C D E`` is followed by one of its k rotations (``C D E A B``): in order within the rotation, so a prefix still
predicts the next word, but at each query position the earlier copy stands at several distances, equally often.
A pattern of positions alone, even one that leaves out the keys holding the query's own token (what one layer can
add to positions on random words: whether a key's token is its own), then reaches at most
:func:`position_bound`: at the lab's context of 16, 0.33 (0.17 without leaving out its own token), against 1 on an
unrotated probe."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attention_lab.data.corpus import BOS, PAD, UNK

__all__ = ["PrefixProbe", "position_bound", "prefix_probe", "repeated_random_words"]

PROBE_SEED = 0  # the same probe in every run
MIN_WORDS = 3  # the shortest repeated sequence (the induction task's default shortest)
ROWS_PER_LAYOUT = 2  # rows, each of fresh random words, for every (sequence length, rotation)


@dataclass(frozen=True)
class PrefixProbe:
    """The probe and its layout: ``tokens`` (R, T); row r holds ``lengths[r]`` words, then the same words rotated
    left by ``rotations[r]``, then distinct words that occur once (filling the row to T)."""
    tokens: Tensor
    lengths: tuple[int, ...]
    rotations: tuple[int, ...]

    def occurrences(self) -> list[tuple[int, int, int]]:
        """Every (row, query, earlier occurrence of the query's token) the prefix-matching score averages over: its
        target key is the one after the earlier occurrence."""
        return [(row, length + i, (i + rotation) % length)
                for row, (length, rotation) in enumerate(zip(self.lengths, self.rotations, strict=True))
                for i in range(length)]


def prefix_probe(vocab: list[str], context_length: int, seed: int = PROBE_SEED) -> PrefixProbe:
    """The probe for a vocabulary and context: rows of T = min(context, words) positions; for every length k from
    MIN_WORDS (fewer when T is too short) to T // 2 and every rotation 0..k-1, ROWS_PER_LAYOUT rows of random distinct
    words. Special tokens (``<pad>``, ``<unk>``, ``<bos>``) are left out."""
    words = torch.tensor([i for i, word in enumerate(vocab) if word not in (PAD, UNK, BOS)])
    width = min(context_length, len(words))
    generator = torch.Generator().manual_seed(seed)
    rows, lengths, rotations = [], [], []
    for length in range(min(MIN_WORDS, width // 2), width // 2 + 1):
        for rotation in range(length):
            for _ in range(ROWS_PER_LAYOUT):
                distinct = words[torch.randperm(len(words), generator=generator)[:width - length]]
                repeat = torch.roll(distinct[:length], -rotation)
                rows.append(torch.cat([distinct[:length], repeat, distinct[length:]]))
                lengths.append(length)
                rotations.append(rotation)
    return PrefixProbe(torch.stack(rows), tuple(lengths), tuple(rotations))


def repeated_random_words(vocab: list[str], context_length: int, seed: int = PROBE_SEED) -> Tensor:
    """The probe's tokens, (R, T): what the module runs at every validation."""
    return prefix_probe(vocab, context_length, seed).tokens


def position_bound(probe: PrefixProbe, avoid_own_token: bool = True) -> float:
    """The highest prefix-matching score on ``probe`` of any attention pattern that depends only on positions; with
    ``avoid_own_token``, also when the keys holding the query's own token are left out (the weights renormalised over
    the rest, what a head with a large negative score for its own token does).

    Such a pattern gives query position t one weight vector x over the keys, in every row. A row whose query t has
    its earlier occurrence at j scores x[j+1] / (1 - x[j]); write T_j for it. For two rows at t with j, j' not
    adjacent (|j - j'| >= 2), the keys j, j+1, j', j'+1 are distinct, so 1 - x[j] >= x[j+1] + x[j'+1], and
    T_j + T_j' <= 1; likewise the T of any set of pairwise non-adjacent j sum to at most 1. Maximising
    sum_j c_j T_j (c_j: rows at t with that j) under these constraints is the fractional clique problem of a path,
    whose optimum (a path's complement is perfect) is its heaviest clique: max_j (c_j + c_{j+1}). It is reached in
    the limit: weight 1 - e on key j+1 and e on key j+2, and the row with j scores 1 - e, the row with j+1 (its own
    key j+1 left out) 1. Without avoiding, a row scores x[j+1] and the optimum is max_j c_j. The
    bound is that, summed over the query positions, over the number of queries."""
    counts: dict[int, dict[int, int]] = {}
    for _, query, earlier in probe.occurrences():
        by_key = counts.setdefault(query, {})
        by_key[earlier] = by_key.get(earlier, 0) + 1
    best = (max(c + by_key.get(j + 1, 0) for j, c in by_key.items()) if avoid_own_token else max(by_key.values())
            for by_key in counts.values())
    return sum(best) / len(probe.occurrences())
