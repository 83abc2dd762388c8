"""The probe of Olsson et al.'s (2022) prefix-matching score: random words repeated twice.

Prefix matching is the attention from a token of the second copy to the token right after its occurrence in the
first copy (the ``induction`` pattern of :mod:`attention_lab.analysis.head_scores`). Measured on such a probe rather than
on the task's inputs, it asks whether a head matches prefixes in any text: the probe is the same for every task,
drawn once from the vocabulary's words with a fixed seed, so runs of different tasks and seeds are scored on
one input.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attention_lab.data.corpus import BOS, PAD, UNK

__all__ = ["repeated_random_words"]

PROBE_ROWS = 16  # sequences in the probe
PROBE_SEED = 0  # the same probe in every run


def repeated_random_words(vocab: list[str], context_length: int, rows: int = PROBE_ROWS,
                          seed: int = PROBE_SEED) -> Tensor:
    """(rows, 2 L) token ids: each row L distinct random words, then the same L words again. L is half the
    context (the longest input the model embeds), or fewer when the vocabulary has fewer words. Special tokens
    (``<pad>``, ``<unk>``, ``<bos>``) are left out."""
    words = torch.tensor([i for i, word in enumerate(vocab) if word not in (PAD, UNK, BOS)])
    length = min(context_length // 2, len(words))
    generator = torch.Generator().manual_seed(seed)
    first = torch.stack([words[torch.randperm(len(words), generator=generator)[:length]] for _ in range(rows)])
    return torch.cat([first, first], dim=1)  # (rows, 2 L)
