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
path computes the output through ``hook_weights``. The fast path is that map up to ``chunk`` positions and the
chunked prefix sums of ``linear`` beyond (time linear in T), plus the fused window softmax. Causal only.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attention_lab.attention.arguments import check_positive_int, check_split_heads
from attention_lab.attention.base import AttentionModule
from attention_lab.attention.errors import AttentionArgumentError
from attention_lab.attention.functional import AttentionOutput, attend
from attention_lab.attention.linear import causal_sums, safe_divide
from attention_lab.attention.mamba2 import CHUNK
from attention_lab.attention.masks import allowed_keys
from attention_lab.attention.registry import register
from attention_lab.attention.short_conv import ShortCausalConv, convolve_heads

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


def check_window_size(value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AttentionArgumentError("window_size", value, "a whole number of positions, 0 for no window")


@register("based")
class Based(AttentionModule):
    """W_query and W_key (to feature_dim per head), W_value, a short convolution, Taylor + window, out_proj."""

    takes_source = False
    multi_head = True
    grouped_kv = False
    projects = False  # its Taylor branch never forms scores for rope and alibi to act on
    causal_only = True
    kind = "linear"
    options = ("feature_dim", "window_size", "short_conv", "chunk")
    positions_note = "its Taylor branch never forms the query-key scores that rope and alibi act on"
    rejects = {"window": "its sliding window is a branch beside the linear attention: set model.options.window_size",
               "dropout": "its fast path has no attention weights to drop"}

    def __init__(self, d_in: int, d_out: int, *, d_v: int | None = None, qkv_bias: bool = False,
                 window: int | None = None, dropout: float = 0.0, feature_dim: int = FEATURE_DIM,
                 window_size: int = WINDOW_SIZE, short_conv: int = SHORT_CONV, chunk: int = CHUNK, **common) -> None:
        # window and dropout arrive unset, causal True: build_attention refuses the rest (``rejects``, ``causal_only``).
        super().__init__(**common)
        check_split_heads("based", d_out, self.num_heads, d_v)
        check_positive_int("feature_dim", feature_dim)
        check_window_size(window_size)
        check_positive_int("chunk", chunk)
        self.feature_dim, self.window_size, self.chunk = feature_dim, window_size, chunk
        self.head_dim = feature_dim  # the width of a head's queries and keys
        self.W_query = nn.Linear(d_in, self.num_heads * feature_dim, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, self.num_heads * feature_dim, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.short_conv = ShortCausalConv(2 * self.num_heads * feature_dim + d_out, short_conv)
        self.out_proj = nn.Linear(d_out, d_out)
        self.output_dim = d_out

    def split_heads(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape  # (B, T, H * d) -> (B, H, T, d)
        return x.view(b, t, self.num_heads, -1).transpose(1, 2)

    def project(self, x: Tensor, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # (B, H, T, d'), (B, H, T, d'), (B, H, T, d_v)
        return tuple(self.split_heads(w(z)) for w, z in ((self.W_query, x), (self.W_key, source), (self.W_value, source)))

    def merge(self, context: Tensor) -> Tensor:
        return self.out_proj(super().merge(context))  # (B, T, d_out): the heads mixed

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool) -> AttentionOutput:
        # q, k: (B, H, T, d'); v: (B, H, T, d_v); mask: (B, 1, 1, T) from key padding, or None.
        if mask is not None and mask.shape[-2] != 1:
            raise ValueError(f"'based' takes key masks of shape (B, 1, 1, T_k), got {tuple(mask.shape)}")
        keep = None if mask is None else mask[:, 0].transpose(-2, -1).to(v.dtype)  # (B, T, 1)
        q, k, v = convolve_heads(self.short_conv, (q, k, v), keep)
        q, k = q * self.feature_dim ** -0.25, k * self.feature_dim ** -0.25  # q·k / √d'
        if need_weights or self.weights_hooked:  # the map itself (two normalisations: hook_weights only)
            weights = self.hook_weights(self.implied_map(q, k, mask))  # (B, H, T, T)
            return AttentionOutput(weights @ v, weights if need_weights else None)
        if v.shape[-2] <= self.chunk:
            return AttentionOutput(self.implied_map(q, k, mask) @ v, None)  # the quadratic form
        phi_k = taylor_features(k)  # (B, H, T, 1 + d' + d'²)
        if mask is not None:
            phi_k = phi_k * mask.transpose(-2, -1).to(phi_k.dtype)  # a hidden key adds nothing to the sums
        context = safe_divide(*causal_sums(taylor_features(q), phi_k, v, self.chunk))  # (B, H, T, d_v)
        if self.window_size:
            window = attend(q, k, v, causal=True, mask=mask, window=self.window_size, scale=1.0, need_weights=False)
            context = (context + window.context) / 2
        return AttentionOutput(context, None)

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
