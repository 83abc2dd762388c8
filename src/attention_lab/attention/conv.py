"""A gated long convolution in the style of Zoology's BaseConv (Arora et al. 2023) and Hyena (Poli et al. 2023):
the values pass a short depthwise convolution, then a learned filter as long as the sequence, and the result is
gated by a projection of the input:

    context = out_proj( W_gate(x) ⊙ (h * short_conv(W_value(x))) )

The long filter h is implicit (as Hyena's): per head, a sum of damped cosines of the lag τ,
h(τ) = Σ_n c_n · exp(-a_n |τ|) · cos(θ_n τ + φ_n), so it exists for every length with a fixed number of
parameters. With ``causal=True`` it reads lags τ >= 0 only (the past); otherwise both sides. The fast path
applies it with an FFT (time T log T); the weights path writes it out as the T × T Toeplitz matrix
W[i, j] = h(i - j) and multiplies. That matrix is the convolution's "attention map": the same for every input,
which is what separates it from attention. The channels of a head share its filter; ``num_heads = d_out`` gives
each channel its own, as BaseConv does.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attention_lab.attention.arguments import check_split_heads
from attention_lab.attention.base import AttentionModule
from attention_lab.attention.functional import AttentionOutput
from attention_lab.attention.registry import register

FILTER_TERMS = 16  # damped cosines per head
SHORT_KERNEL = 3  # taps of the short convolution


class DampedCosineFilter(nn.Module):
    """h_h(τ) = Σ_n c[h, n] · exp(-a[h, n] · |τ|) · cos(θ[h, n] · τ + φ[h, n]), a = softplus(decay) > 0."""

    def __init__(self, num_heads: int, terms: int = FILTER_TERMS) -> None:
        super().__init__()
        # Half-lives from 1 to ~1000 positions and frequencies over [0, π]: short and long, slow and fast filters.
        half_life = torch.logspace(0, 3, terms).expand(num_heads, terms)
        rate = math.log(2) / half_life
        self.decay = nn.Parameter(torch.log(torch.expm1(rate)))  # softplus(decay) = rate
        self.frequency = nn.Parameter(torch.rand(num_heads, terms) * math.pi)
        self.phase = nn.Parameter(torch.rand(num_heads, terms) * 2 * math.pi)
        self.coefficient = nn.Parameter(torch.randn(num_heads, terms) / math.sqrt(terms))

    def forward(self, lags: Tensor) -> Tensor:
        """lags (L,) integers -> (H, L) filter values."""
        tau = lags.to(self.coefficient.dtype)  # (L,)
        damping = torch.exp(-F.softplus(self.decay)[..., None] * tau.abs())  # (H, N, L)
        wave = torch.cos(self.frequency[..., None] * tau + self.phase[..., None])  # (H, N, L)
        return (self.coefficient[..., None] * damping * wave).sum(dim=1)


def toeplitz(kernel: Tensor, t: int, causal: bool) -> Tensor:
    """(H, L) filter values at lags 0..t-1 (causal) or -(t-1)..t-1 -> (H, t, t) with W[i, j] = h(i - j)."""
    offset = torch.arange(t, device=kernel.device)[:, None] - torch.arange(t, device=kernel.device)[None, :]
    if causal:
        return kernel[:, offset.clamp_min(0)] * (offset >= 0)
    return kernel[:, offset + t - 1]


def fft_convolve(v: Tensor, kernel: Tensor, causal: bool) -> Tensor:
    """v (B, H, T, d), kernel (H, L) as in :func:`toeplitz` -> (B, H, T, d): y_i = Σ_j h(i - j) v_j, by FFT.

    Zero-padded to n >= 2T, so the circular convolution never wraps a lag around.
    """
    t = v.shape[-2]
    n = 2 * t
    if causal:
        padded = kernel  # lags 0..t-1 at 0..t-1
    else:  # lags 0..t-1 at 0..t-1, lags -(t-1)..-1 at n-(t-1)..n-1
        padded = torch.cat([kernel[:, t - 1:], kernel.new_zeros(kernel.shape[0], 1), kernel[:, :t - 1]], dim=1)
    spectrum = torch.fft.rfft(v.transpose(-2, -1), n=n) * torch.fft.rfft(padded, n=n)[:, None, :]  # (B, H, d, n//2+1)
    return torch.fft.irfft(spectrum, n=n)[..., :t].transpose(-2, -1)


@register("conv")
class GatedLongConvolution(AttentionModule):
    """No attention: `out_proj(W_gate(x) ⊙ (h * short_conv(W_value(x))))`, h an implicit filter as long as the input
    (damped cosines per head), by FFT; weights: its Toeplitz matrix h(i − j), the same for every input.

    W_gate, W_value, a short depthwise convolution, an implicit long filter per head, out_proj.
    """

    origin = "Arora et al. 2023, *Zoology* (BaseConv); Poli et al. 2023, *Hyena*"
    summary = "no attention: a gated long convolution, by FFT"

    takes_source = False
    multi_head = True
    grouped_kv = False
    projects = False
    kind = "conv"
    positions_note = "a convolution has no queries and keys to rotate or bias (its filter already reads distances)"
    rejects = {"window": "its filter is as long as the sequence", "dropout": "its fast path has no map to drop entries of"}

    @classmethod
    def state_size(cls, d_model: int, num_heads: int, seq_len: int, **options) -> int:
        """The long filter reads every earlier value: its length (seq_len) × d, and the short one's last taps."""
        return (seq_len + SHORT_KERNEL - 1) * d_model

    def __init__(self, d_in: int, d_out: int, *, d_v: int | None = None, qkv_bias: bool = False,
                 window: int | None = None, dropout: float = 0.0, **common) -> None:
        # window and dropout arrive unset: build_attention refuses them (``rejects``).
        super().__init__(**common)
        check_split_heads("conv", d_out, self.num_heads, d_v)
        self.head_dim = d_out // self.num_heads
        self.W_gate = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.short_conv = nn.Conv1d(d_out, d_out, SHORT_KERNEL, groups=d_out)  # depthwise: one filter per channel
        self.long_filter = DampedCosineFilter(self.num_heads)
        self.out_proj = nn.Linear(d_out, d_out)
        self.output_dim = d_out

    def split_heads(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape  # (B, T, H * head_dim) -> (B, H, T, head_dim)
        return x.view(b, t, self.num_heads, self.head_dim).transpose(1, 2)

    def project(self, x: Tensor, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        gate, values = self.split_heads(self.W_gate(x)), self.split_heads(self.W_value(source))
        return gate, values, values  # a convolution has no keys: the values stand in for them

    def merge(self, context: Tensor) -> Tensor:
        return self.out_proj(super().merge(context))  # (B, T, d_out): the heads mixed

    def kernel(self, t: int, device: torch.device | None = None) -> Tensor:
        """The long filter for sequences of length t: (H, t) at lags 0..t-1 if causal, else (H, 2t-1) at lags
        -(t-1)..t-1."""
        lags = torch.arange(0 if self.causal else -(t - 1), t, device=device)
        return self.long_filter(lags)

    def short(self, v: Tensor) -> Tensor:
        """The short depthwise convolution over positions, causal (taps t-2..t) or centred (t-1..t+1)."""
        b, h, t, d = v.shape
        channels = v.transpose(1, 2).reshape(b, t, h * d).transpose(1, 2)  # (B, H * d, T), channel = head * d + i
        left = SHORT_KERNEL - 1 if self.causal else (SHORT_KERNEL - 1) // 2
        channels = self.short_conv(F.pad(channels, (left, SHORT_KERNEL - 1 - left)))
        return channels.transpose(1, 2).reshape(b, t, h, d).transpose(1, 2)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool) -> AttentionOutput:
        # q: the gate (B, H, T, d); v: the values (B, H, T, d); mask: (B, 1, 1, T) from key padding, or None.
        if mask is not None:
            if mask.shape[-2] != 1:
                raise ValueError(f"'conv' takes key masks of shape (B, 1, 1, T_k), got {tuple(mask.shape)}")
            keep = mask.transpose(-2, -1).to(v.dtype)  # (B, 1, T, 1): a hidden position is read by no output
            v = self.short(v * keep) * keep
        else:
            v = self.short(v)
        t = v.shape[-2]
        kernel = self.kernel(t, v.device).to(v.dtype)
        if need_weights or self.weights_hooked:  # no scores: the filter is the map (hook_weights only)
            weights = toeplitz(kernel, t, self.causal).expand(v.shape[0], -1, -1, -1)  # (B, H, T, T)
            if mask is not None:
                weights = weights * mask
            weights = self.hook_weights(weights)
            return AttentionOutput(q * (weights @ v), weights if need_weights else None)
        return AttentionOutput(q * fft_convolve(v, kernel, self.causal), None)
