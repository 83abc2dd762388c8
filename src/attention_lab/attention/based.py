"""Based (Arora et al. 2024, "Simple linear attention language models balance the recall-throughput tradeoff").

Linear attention whose feature map is the 2nd-order Taylor expansion of exp: with q and k projected to a small
``feature_dim`` d' (the paper's 16) and each scaled by d'^(-1/4), so that s = q·k / √d' as in softmax attention,

    φ(x) = [1, x, vec(x xᵀ) / √2],    φ(q)·φ(k) = 1 + s + s²/2 > 0,

and context_i = Σ_{j<=i} φ(q_i)·φ(k_j) v_j / Σ_{j<=i} φ(q_i)·φ(k_j), normalised by the sum as in ``linear``.
The state per head is (1 + d' + d'²) × d_v whatever T is.

The paper's hybrid mixes three kinds of layer; here the two that read earlier positions live in this one module,
their outputs summed with weight ½ each (out_proj absorbs the constant; the halves keep the map row-stochastic):

* the Taylor linear attention above, over every earlier position;
* exact softmax attention over the last ``window_size`` positions (0: none), softmax(s) with the same s: exp
  itself where the Taylor branch has its expansion. A branch beside the global one, not a limit on it: hence
  its own option, and the shared ``window`` (which restricts a variant's every key) is refused.

and the third, the short gated convolution, becomes a short causal depthwise convolution and SiLU on q, k and v
(``short_conv`` taps; 0: none), as in ``mamba2`` (:mod:`.short_conv`). The map is the T × T matrix the output is
computed from, ½ (Taylor map, rows normalised) + ½ (window's softmax), over the convolved values; the weights
path computes the output through ``hook_weights``. The fast path is that map up to ``chunk`` positions; beyond,
the Taylor branch in chunks (the kernel within a chunk, ``linear``'s prefix sums of the features across chunks)
and the window a chunk of queries at a time: time linear in T. Causal only.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from attention_lab.attention.arguments import check_positive_int
from attention_lab.attention.errors import AttentionArgumentError
from attention_lab.attention.functional import AttentionOutput, attend
from attention_lab.attention.linear import safe_divide
from attention_lab.attention.masks import allowed_keys
from attention_lab.attention.recurrent import Recurrence
from attention_lab.attention.registry import register

FEATURE_DIM = 16  # d', the width q and k are projected to before the Taylor map (the paper's)
WINDOW_SIZE = 64  # positions of the exact softmax branch (the paper's sliding window)
SHORT_CONV = 3  # taps of the short convolution (the paper's short convolutions)


def taylor_features(x: Tensor) -> Tensor:
    """φ(x) = [1, x, vec(x xᵀ)/√2]: (..., d') -> (..., 1 + d' + d'²), so that φ(q)·φ(k) = 1 + q·k + (q·k)²/2."""
    outer = (x[..., :, None] * x[..., None, :]).flatten(-2) / math.sqrt(2)  # (..., d'²): (q·k)² = vec(qqᵀ)·vec(kkᵀ)
    return torch.cat([torch.ones_like(x[..., :1]), x, outer], dim=-1)


def taylor_kernel(scores: Tensor) -> Tensor:
    """1 + s + s²/2: φ(q)·φ(k) from s = q·k, without forming the features."""
    return 1.0 + scores + scores.square() / 2


def in_chunks(x: Tensor, chunk: int) -> Tensor:
    """(B, H, T, e) -> (B, H, N, chunk, e), zeros after the end (a zero ``keep`` there: hidden keys)."""
    return F.pad(x, (0, 0, 0, -x.shape[-2] % chunk)).unflatten(2, (-1, chunk))


def taylor_chunked(q: Tensor, k: Tensor, v: Tensor, keep: Tensor, chunk: int) -> Tensor:
    """The Taylor branch in chunks, time linear in T: (B, H, T, d_v). keep: (B, 1, T, 1), 0 at a hidden key.

    Within a chunk, the kernel 1 + s + s²/2 from the d'-wide scores (the features would be 1 + d' + d'² wide);
    from the chunks before it, the running sums Σ φ(k_j) v_jᵀ and Σ φ(k_j) (``linear``'s prefix sums)."""
    t = q.shape[-2]
    q, k, v, keep = (in_chunks(z, chunk) for z in (q, k, v, keep))  # (B, H or 1, N, C, .)
    within = (taylor_kernel(q @ k.transpose(-2, -1)) * keep.transpose(-2, -1)).tril()  # (B, H, N, C, C)
    phi_q, phi_k = taylor_features(q), taylor_features(k) * keep  # (B, H, N, C, 1 + d' + d'²)
    sums = torch.cat([phi_k.transpose(-2, -1) @ v, phi_k.sum(dim=-2)[..., None]], dim=-1)  # (B, H, N, F, d_v + 1)
    before = torch.cat([torch.zeros_like(sums[:, :, :1]), sums.cumsum(dim=2)[:, :, :-1]], dim=2)  # earlier chunks'
    numerator = within @ v + phi_q @ before[..., :-1]  # (B, H, N, C, d_v)
    denominator = within.sum(dim=-1, keepdim=True) + phi_q @ before[..., -1:]  # (B, H, N, C, 1)
    return safe_divide(numerator, denominator).flatten(2, 3)[:, :, :t]


def window_chunked(q: Tensor, k: Tensor, v: Tensor, keep: Tensor, window: int, chunk: int) -> Tensor:
    """softmax(s) over the last ``window`` positions: (B, H, T, d_v). Up to a chunk wide, each chunk's queries meet
    only its own and the previous chunk's keys (time linear in T); wider, the whole causal band at once."""
    t = q.shape[-2]
    if window > chunk:
        mask = keep.transpose(-2, -1).bool()  # (B, 1, 1, T)
        return attend(q, k, v, causal=True, mask=mask, window=window, scale=1.0, need_weights=False).context
    q, k, v, keep = (in_chunks(z, chunk) for z in (q, k, v, keep))  # (B, H or 1, N, C, .)
    k, v, keep = (torch.cat([F.pad(z, (0, 0, 0, 0, 1, -1)), z], dim=-2) for z in (k, v, keep))  # (., N, 2C, .)
    offset = torch.arange(chunk, device=q.device)[:, None] + chunk - torch.arange(2 * chunk, device=q.device)
    mask = (offset >= 0) & (offset < window) & keep.transpose(-2, -1).bool()  # (B, 1, N, C, 2C): i - j in [0, w)
    return attend(q, k, v, mask=mask, scale=1.0).context.flatten(2, 3)[:, :, :t]


def check_window_size(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AttentionArgumentError("window_size", value, "a whole number of positions, 0 for no window")


@register("based")
class Based(Recurrence):
    """q and k projected to `feature_dim` d' (16) per head and scaled by d'^(−1/4), after a short causal convolution
    on q, k and v (`short_conv` taps, 3); ½ · linear attention with the 2nd-order Taylor map φ(q)·φ(k) = 1 + q·k +
    (q·k)²/2, normalised by the row sum (state (1 + d' + d'²) × d_v per head; chunked prefix sums past `chunk`), + ½
    · exact softmax over the last `window_size` positions (64; 0: none); weights: that T × T map, row-stochastic;
    `causal=True` only.

    W_query and W_key (to feature_dim per head), W_value, a short convolution, Taylor + window, out_proj.
    """

    origin = (
        "Arora et al. 2024, *Simple linear attention language models balance the recall-throughput tradeoff* (Based)"
    )
    summary = (
        "linear attention with the Taylor map 1 + q·k + (q·k)²/2, plus a sliding softmax window and a short "
        "convolution; `mask=causal` only"
    )

    kind = "linear"
    options = ("feature_dim", "window_size", "short_conv", "chunk")
    positions_note = "its Taylor branch never forms the query-key scores that rope and alibi act on"
    rejects = {"window": "its sliding window is a branch beside the linear attention: set model.options.window_size",
               "dropout": "its fast path has no attention weights to drop"}

    @classmethod
    def state_size(cls, d_model: int, num_heads: int, seq_len: int, feature_dim: int = FEATURE_DIM,
                   window_size: int = WINDOW_SIZE, short_conv: int = SHORT_CONV, **options) -> int:
        """Per head the Taylor branch's running sums Σ φ(k)ᵀv and Σ φ(k) ((1 + d' + d'²) × (d_h + 1)), the window's
        last keys and values (2 · min(T, window_size) · d) and the short convolution's last inputs of q and k (d'
        per head each) and v (d)."""
        d_head, features = d_model // num_heads, 1 + feature_dim + feature_dim**2
        return (num_heads * features * (d_head + 1) + 2 * min(seq_len, window_size) * d_model
                + max(short_conv - 1, 0) * (2 * num_heads * feature_dim + d_model))

    def __init__(self, d_in: int, d_out: int, *, feature_dim: int = FEATURE_DIM, window_size: int = WINDOW_SIZE,
                 short_conv: int = SHORT_CONV, **shared) -> None:
        check_positive_int("feature_dim", feature_dim)  # before W_query and W_key are made that wide
        check_window_size(window_size)
        super().__init__(d_in, d_out, short_conv=short_conv, head_dim=feature_dim, **shared)  # head_dim: d' per head
        self.feature_dim, self.window_size = feature_dim, window_size

    def project(self, x: Tensor, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # q, k, v made in this order, as based always made them (the order their gradients reach x in, see
        # Recurrence.project): (B, H, T, d'), (B, H, T, d'), (B, H, T, d_v)
        return tuple(self.split_heads(w(z)) for w, z in ((self.W_query, x), (self.W_key, source), (self.W_value, source)))

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool) -> AttentionOutput:
        # q, k: (B, H, T, d'); v: (B, H, T, d_v); mask: (B, 1, 1, T) from key padding, or None.
        q, k, v = self.convolve((q, k, v), mask)
        q, k = q * self.feature_dim ** -0.25, k * self.feature_dim ** -0.25  # q·k / √d'
        # The map itself (two normalisations: hook_weights only) as the quadratic form, the two branches in chunks past one.
        return self.mix(lambda: self.implied_map(q, k, mask), v, lambda: self.chunked(q, k, v, mask), need_weights)

    def chunked(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        """The Taylor branch in chunks, plus the window's (halved), time linear in T: (B, H, T, d_v)."""
        keep = torch.ones_like(v[:, :1, :, :1]) if mask is None else mask.transpose(-2, -1).to(v.dtype)  # (B, 1, T, 1)
        context = taylor_chunked(q, k, v, keep, self.chunk)  # (B, H, T, d_v)
        if self.window_size:
            context = (context + window_chunked(q, k, v, keep, self.window_size, self.chunk)) / 2
        return context

    def implied_map(self, q: Tensor, k: Tensor, mask: Tensor | None) -> Tensor:
        """½ (Taylor map, rows normalised) + ½ (window softmax), or the Taylor map alone: (B, H, T, T)."""
        t = q.shape[-2]
        kernel = taylor_kernel(q @ k.transpose(-2, -1))  # (B, H, T, T), every entry > 0
        kernel = kernel * allowed_keys(t, t, causal=True, mask=mask, device=q.device)
        taylor = safe_divide(kernel, kernel.sum(dim=-1, keepdim=True))
        if not self.window_size:
            return taylor
        window = attend(q, k, k, causal=True, mask=mask, window=self.window_size, scale=1.0, need_weights=True)
        return (taylor + window.weights) / 2
