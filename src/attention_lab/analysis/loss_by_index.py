"""Olsson et al.'s (2022) instruments on the validation set: the loss at each target index, and an in-context score
that contrasts a late target with an early one.

The target index of a target is its rank among the real (non-pad) targets of its sequence: 0 for the first
word the sequence asks for. For task=induction that is the index in the repeat (target i predicts the repeat's
(i+1)-th word), the same for every sequence length, so a step x index heatmap shows where in the repeat the loss
falls when the induction heads form (Olsson et al.'s loss by token index over training).

The in-context score is Olsson et al.'s "loss at a late token minus loss at an early one" (they take the 500th
and the 50th token of natural text). The lab's sequences are short and every task asks for a few targets only,
so it contrasts the last real target of each sequence with the first: the mean over sequences (with at least two
real targets) of loss(last) − loss(first), in nats. Negative: later targets are predicted better than the first.
It weighs two targets of each sequence with opposite signs, so it is not a function of the mean loss
(``tests/analysis/test_loss_by_index.py`` builds two profiles with one mean loss and different scores).
"""

from __future__ import annotations

import torch
from torch import Tensor
from torchmetrics import Metric

from attention_lab.data.corpus import PAD_ID

__all__ = ["LossByIndex", "late_minus_early"]


def target_index(targets: Tensor) -> Tensor:
    """(B, T) targets -> (B, T) long: each real target's rank among its sequence's real targets, -1 at pads."""
    real = targets != PAD_ID
    return torch.where(real, real.long().cumsum(-1) - 1, torch.full_like(targets, -1))


def late_minus_early(token_loss: Tensor, targets: Tensor) -> tuple[Tensor, Tensor]:
    """Per sequence with at least two real targets, loss at its last real target minus loss at its first:
    (sum over those sequences, their count). token_loss and targets: (B, T)."""
    index = target_index(targets)  # (B, T)
    last = index.max(-1, keepdim=True).values  # (B, 1): the last real target's index
    first_loss = (token_loss * (index == 0)).sum(-1)  # (B,)
    last_loss = (token_loss * ((index == last) & (index >= 0))).sum(-1)
    counted = last.squeeze(-1) >= 1  # (B,): two real targets or more
    return ((last_loss - first_loss) * counted).sum(), counted.sum()


class LossByIndex(Metric):
    """The mean loss at each target index over everything ``update`` saw (and over DDP processes): sums and
    counts per index, so the result is exact over the whole validation set. ``compute`` -> (max_len,) with NaN
    where no target had that index."""

    full_state_update = False

    def __init__(self, max_len: int) -> None:
        super().__init__()
        self.add_state("total", default=torch.zeros(max_len), dist_reduce_fx="sum")
        self.add_state("count", default=torch.zeros(max_len), dist_reduce_fx="sum")

    def update(self, token_loss: Tensor, targets: Tensor) -> None:
        index = target_index(targets)  # (B, T)
        real = index >= 0
        where = index[real]  # (N,): the index of each real target
        self.total.index_add_(0, where, token_loss[real].to(self.total.dtype))
        self.count.index_add_(0, where, torch.ones_like(where, dtype=self.count.dtype))

    def compute(self) -> Tensor:
        return torch.where(self.count > 0, self.total / self.count.clamp_min(1), torch.nan)
