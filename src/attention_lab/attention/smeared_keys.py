"""Smeared keys (Olsson et al. 2022, "In-context learning and induction heads", argument 2): each key is mixed
with the key one position earlier, k'_j = σ(α_h) k_j + (1 − σ(α_h)) k_{j−1}, with one learned α_h per key head.

A one-layer model cannot form an induction head without it: matching "the token after an earlier occurrence of
mine" needs the previous token's identity in the key, which otherwise only a head of an earlier layer can copy
there. The smear puts it there directly. It is causal: k'_j reads positions j and j − 1 only. The key before the
first one, k_{−1}, is 0 (as a zero-padded convolution of width 2), so k'_0 = σ(α_h) k_0.

α_h starts at 0 (an even mix); σ(α_h) near 1 is the plain key.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn


class SmearedKeys(nn.Module):
    """k (B, H_k, T, d) -> the smeared keys, same shape. ``heads``: one α per key head (a variant whose keys come
    split further, as diff's two halves per head at 2h and 2h + 1, shares its head's α among them)."""

    def __init__(self, heads: int) -> None:
        super().__init__()
        self.alpha = nn.Parameter(torch.zeros(heads))  # (H,)

    def mix(self) -> Tensor:
        """σ(α_h): the share of each head's own key, (H,)."""
        return torch.sigmoid(self.alpha)

    def forward(self, k: Tensor) -> Tensor:
        share = self.mix().repeat_interleave(k.shape[-3] // self.alpha.numel())  # (H_k,)
        share = share.to(k.dtype)[:, None, None]  # (H_k, 1, 1), broadcast over (B, H_k, T, d)
        previous = F.pad(k, (0, 0, 1, 0))[..., :-1, :]  # (B, H_k, T, d): k_{j-1}, zero at j = 0
        return share * k + (1 - share) * previous
