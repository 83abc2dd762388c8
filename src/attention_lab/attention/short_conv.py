"""The short causal depthwise convolution that Mamba-2 and Gated DeltaNet put in front of their recurrence.

Each channel of the projected inputs is mixed with its own last few positions (a filter of ``kernel`` taps,
lags 0..kernel-1), then passed through SiLU, as in ``mamba_ssm``'s Mamba2 layer and fla's ShortConvolution. It
lets a key see the token before it, the previous-token step of an induction head, which a recurrence with one
decaying state per head does poorly on its own (Zoology, Arora et al. 2023). ``kernel=0`` leaves the inputs as
they are (no convolution and no SiLU).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attention_lab.attention.errors import AttentionArgumentError


class ShortCausalConv(nn.Module):
    """Depthwise causal convolution over positions, then SiLU: (B, T, channels) -> (B, T, channels)."""

    def __init__(self, channels: int, kernel: int) -> None:
        super().__init__()
        if isinstance(kernel, bool) or not isinstance(kernel, int) or kernel < 0:
            raise AttentionArgumentError("short_conv", kernel, "a whole number of taps, 0 for no convolution")
        self.kernel = kernel
        self.conv = nn.Conv1d(channels, channels, kernel, groups=channels) if kernel else None

    def forward(self, x: Tensor, keep: Tensor | None = None) -> Tensor:
        # x: (B, T, C); keep: (B, T, 1), 0 at a hidden position, whose input then reaches no later position.
        if keep is not None:
            x = x * keep
        if self.conv is None:
            return x
        channels = F.pad(x.transpose(1, 2), (self.kernel - 1, 0))  # (B, C, kernel - 1 + T): the past only
        return F.silu(self.conv(channels)).transpose(1, 2)  # (B, T, C)


def convolve_heads(conv: ShortCausalConv, tensors: tuple[Tensor, ...], keep: Tensor | None) -> tuple[Tensor, ...]:
    """(B, H, T, d) tensors side by side through one convolution (one filter per channel), split back."""
    b, h, t, _ = tensors[0].shape
    widths = [x.shape[1] * x.shape[-1] for x in tensors]
    side_by_side = [x.transpose(1, 2).reshape(b, t, -1) for x in tensors]  # (B, T, H * d) each
    mixed = conv(torch.cat(side_by_side, dim=-1), keep).split(widths, dim=-1)
    return tuple(m.reshape(b, t, x.shape[1], x.shape[-1]).transpose(1, 2) for m, x in zip(mixed, tensors, strict=True))

