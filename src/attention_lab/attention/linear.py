"""Linear attention (Katharopoulos et al. 2020, "Transformers are RNNs"): the softmax's exp(q·k) becomes
φ(q)·φ(k) with the feature map φ(x) = elu(x) + 1, so the keys and values can be summed before the queries meet
them: context_i = φ(q_i)ᵀ Σ_j φ(k_j) v_jᵀ / φ(q_i)ᵀ Σ_j φ(k_j). With ``causal=True`` the sums run over j <= i,
as prefix sums: time and memory grow linearly in T on the fast path.

The weights path returns the T × T matrix those sums imply, φ(q)·φ(k)ᵀ with each row normalised, so attention
maps, head scores and head ablation work as for softmax attention. Heads and ``kv_heads`` as in ``multihead``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attention_lab.attention.arguments import check_split_heads
from attention_lab.attention.functional import AttentionOutput
from attention_lab.attention.masks import allowed_keys
from attention_lab.attention.multihead import MultiHeadAttention
from attention_lab.attention.registry import register

CHUNK = 64  # positions per chunk of the causal sums


def feature_map(x: Tensor) -> Tensor:
    """φ(x) = elu(x) + 1 > 0: positive features, so every normaliser is positive."""
    return F.elu(x) + 1.0


def safe_divide(numerator: Tensor, denominator: Tensor) -> Tensor:
    """numerator / denominator, and 0 where the denominator is 0 (a query with no key to read), never NaN."""
    empty = denominator == 0
    return numerator / denominator.masked_fill(empty, 1.0) * ~empty


def causal_sums(phi_q: Tensor, phi_k: Tensor, v: Tensor, chunk: int = CHUNK) -> tuple[Tensor, Tensor]:
    """Σ_{j<=i} (φ(q_i)·φ(k_j)) v_j and Σ_{j<=i} φ(q_i)·φ(k_j) for every i: (B, H, T, d_v), (B, H, T, 1).

    In chunks of ``chunk`` positions: within a chunk the (chunk x chunk) scores, lower triangle; from the
    chunks before it the running sums S = Σ φ(k_j) v_jᵀ (d x d_v) and z = Σ φ(k_j), one per chunk. Time and
    memory grow linearly in T (the prefix sums of the paper, a chunk at a time).
    """
    t = phi_q.shape[2]
    chunk = min(chunk, t)
    pad = -t % chunk  # zero keys and values at the end add nothing to any sum
    if pad:
        phi_q, phi_k, v = (F.pad(x, (0, 0, 0, pad)) for x in (phi_q, phi_k, v))
    n = (t + pad) // chunk
    q_c, k_c, v_c = (x.unflatten(2, (n, chunk)) for x in (phi_q, phi_k, v))  # (B, H, N, C, .)
    within = (q_c @ k_c.transpose(-2, -1)).tril()  # (B, H, N, C, C): key j <= query i inside the chunk
    kv = k_c.transpose(-2, -1) @ v_c  # (B, H, N, d, d_v): each chunk's own sum
    z = k_c.sum(dim=-2)  # (B, H, N, d)
    kv_before = torch.cumsum(kv, dim=2) - kv  # the chunks before each chunk
    z_before = torch.cumsum(z, dim=2) - z
    numerator = within @ v_c + q_c @ kv_before  # (B, H, N, C, d_v)
    denominator = within.sum(dim=-1, keepdim=True) + q_c @ z_before.unsqueeze(-1)  # (B, H, N, C, 1)
    return numerator.flatten(2, 3)[:, :, :t], denominator.flatten(2, 3)[:, :, :t]


@register("linear")
class LinearAttention(MultiHeadAttention):
    """`multihead`'s projections, φ(q)·φ(k)ᵀ with φ = elu + 1 in place of exp; causal by chunked prefix sums (time
    and memory linear in T); weights: the implied T × T matrix, rows normalised.

    ``multihead``'s projections (W_query, W_key, W_value, out_proj), linear attention in between.
    """

    origin = "Katharopoulos et al. 2020, *Transformers are RNNs*"
    summary = "φ(q)·φ(k)ᵀ with φ = elu + 1 instead of the softmax: time linear in the length"

    takes_source = False
    multi_head = True
    grouped_kv = True
    projects = False  # rope and alibi act on the T x T scores, which the fast path never forms
    kind = "linear"
    options = ()  # not multihead's sink: no softmax for a sink to join
    positions_note = "linear attention never forms the query-key scores that rope and alibi act on"
    rejects = {"window": "its sums run over every earlier key", "dropout": "its fast path has no attention weights to drop"}

    @classmethod
    def state_size(cls, d_model: int, num_heads: int, seq_len: int, **options) -> int:
        """Per head the running sum of φ(k)ᵀv (d_k·d_v) and of φ(k) (d_k, the normaliser), whatever the length."""
        d_head = d_model // num_heads
        return num_heads * (d_head * d_head + d_head)

    def __init__(self, d_in: int, d_out: int, *, window: int | None = None, dropout: float = 0.0, **common) -> None:
        # window and dropout arrive unset: build_attention refuses them (``rejects``).
        check_split_heads("linear", d_out, common.get("num_heads", 1), common.get("d_v"))
        super().__init__(d_in, d_out, **common)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool) -> AttentionOutput:
        # q: (B, H, T, d), k: (B, H_kv, T, d), v: (B, H_kv, T, d_v); mask: (B, 1, 1, T) from key padding, or None.
        groups = q.shape[1] // k.shape[1]  # grouped-query attention: query head h reads kv head h // groups
        phi_q = feature_map(q)
        phi_k = feature_map(k).repeat_interleave(groups, dim=1)  # (B, H, T, d)
        v = v.repeat_interleave(groups, dim=1)  # (B, H, T, d_v)
        if mask is not None:
            if mask.shape[-2] != 1:
                raise ValueError(f"'linear' takes key masks of shape (B, 1, 1, T_k), got {tuple(mask.shape)}")
            phi_k = phi_k * mask.transpose(-2, -1).to(phi_k.dtype)  # a hidden key adds nothing to the sums
        if need_weights or self.weights_hooked:
            scores = phi_q @ phi_k.transpose(-2, -1)  # (B, H, T, T), every entry >= 0
            allowed = allowed_keys(q.shape[-2], k.shape[-2], causal=self.causal, device=q.device)
            if allowed is not None:
                scores = scores * allowed
            scores = self.hook_scores(scores)
            weights = self.hook_weights(safe_divide(scores, scores.sum(dim=-1, keepdim=True)))
            return AttentionOutput(weights @ v, weights if need_weights else None)
        if self.causal:
            numerator, denominator = causal_sums(phi_q, phi_k, v)
        else:
            kv = phi_k.transpose(-2, -1) @ v  # (B, H, d, d_v): one sum for every query
            numerator = phi_q @ kv  # (B, H, T, d_v)
            denominator = phi_q @ phi_k.sum(dim=2).unsqueeze(-1)  # (B, H, T, 1)
        return AttentionOutput(safe_divide(numerator, denominator), None)
