"""Hand-written references for section E: the shortest modules that compute what the mixers that replace softmax
attention compute (``linear``, ``sigmoid``, ``conv``, causal), each written straight from its paper. Ours must
keep up with them.

The parameter names are those of ``attention_lab``'s variants (W_query, W_key, W_value, W_gate, short_conv,
long_filter, out_proj), so the tests can load our weights into a twin and compare the outputs.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from benchmarks.twins import TwinBase


class LinearTwin(TwinBase):
    """Katharopoulos et al. 2020, causal: S_i = Σ_{j<=i} φ(k_j) v_jᵀ and z_i = Σ_{j<=i} φ(k_j) as two cumsums
    over all positions (the paper's prefix sums, all T states kept), φ = elu + 1."""

    def forward(self, x: Tensor) -> Tensor:
        queries, keys, values = self.project(x)
        phi_q, phi_k = F.elu(queries) + 1, F.elu(keys) + 1
        states = torch.cumsum(phi_k.unsqueeze(-1) * values.unsqueeze(-2), dim=2)  # (B, H, T, d, d_v)
        normaliser = torch.cumsum(phi_k, dim=2)  # (B, H, T, d)
        numerator = (phi_q.unsqueeze(-2) @ states).squeeze(-2)
        return self.merge(numerator / (phi_q * normaliser).sum(-1, keepdim=True))


class SigmoidTwin(TwinBase):
    """Ramapuram et al. 2024, causal: sigmoid(q·kᵀ/√d - log T), future keys at weight 0, no normalisation."""

    def forward(self, x: Tensor) -> Tensor:
        queries, keys, values = self.project(x)
        t = x.shape[1]
        scores = queries @ keys.transpose(-2, -1) / math.sqrt(self.head_dim) - math.log(t)
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        return self.merge(torch.sigmoid(scores.masked_fill(future, float("-inf"))) @ values)


class DampedCosines(nn.Module):
    """The implicit long filter's parameters, as in attention_lab's conv: h(τ) = Σ_n c e^{-a|τ|} cos(θτ + φ)."""

    def __init__(self, heads: int, terms: int = 16) -> None:
        super().__init__()
        self.decay = nn.Parameter(torch.zeros(heads, terms))
        self.frequency = nn.Parameter(torch.zeros(heads, terms))
        self.phase = nn.Parameter(torch.zeros(heads, terms))
        self.coefficient = nn.Parameter(torch.zeros(heads, terms))


class ConvTwin(nn.Module):
    """BaseConv-style gated long convolution, causal: out_proj(W_gate(x) ⊙ irfft(rfft(u) · rfft(h))), u the
    depthwise 3-tap causal convolution of W_value(x), h the filter at lags 0..T-1, zero-padded to 2T."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.W_gate = nn.Linear(d_model, d_model, bias=False)
        self.W_value = nn.Linear(d_model, d_model, bias=False)
        self.short_conv = nn.Conv1d(d_model, d_model, 3, groups=d_model)
        self.long_filter = DampedCosines(heads)
        self.out_proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        u = self.short_conv(F.pad(self.W_value(x).transpose(1, 2), (2, 0)))  # (B, d, T), channel = head * d_h + i
        f = self.long_filter
        lags = torch.arange(t, device=x.device, dtype=x.dtype)
        h = (f.coefficient[..., None] * torch.exp(-F.softplus(f.decay)[..., None] * lags)
             * torch.cos(f.frequency[..., None] * lags + f.phase[..., None])).sum(1)  # (H, T)
        h = h.repeat_interleave(d // self.heads, dim=0)  # (d, T): each channel its head's filter
        y = torch.fft.irfft(torch.fft.rfft(u, n=2 * t) * torch.fft.rfft(h, n=2 * t), n=2 * t)[..., :t]
        return self.out_proj(self.W_gate(x) * y.transpose(1, 2))
