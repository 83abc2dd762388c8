"""Retention (Sun et al. 2023, "Retentive Network: A Successor to Transformer for Large Language Models").

Per head h, a state S (d × d_v) that decays by a fixed γ_h = 1 − 2^(−5−h) at every position:

    S_n = γ S_{n−1} + k_nᵀ v_n,    o_n = q_n S_n,

with k scaled by 1/√d (the paper's and fla's scaling). Unrolled, the parallel form O = (Q Kᵀ ∘ D) V with
D[n, m] = γ^(n−m) for n >= m and 0 above the diagonal: the T × T map the output is computed from, signed and
not normalised (its rows do not sum to 1). Head 0 forgets fastest (γ = 0.969), each later head twice as slowly.

That is Mamba-2's SSD with a constant decay log γ and step 1 (:mod:`.mamba2`), so the forms are shared with it:
``ssd_map`` is the parallel form, ``ssd_chunked`` the paper's chunkwise form (the parallel form within a chunk,
the state passed from chunk to chunk), used past ``chunk`` positions so that time grows linearly in T. The
weights path returns the map and computes the output through ``hook_weights``.

Each head's output then passes the paper's GroupNorm (one group per head, each position on its own), without
the affine weights: out_proj's columns already scale each channel, and without a bias a zero map still gives a
zero head (the norm is why the paper need not normalise D: the head's scale is taken out afterwards).

Left out: the paper's xPos rotation of q and k (the decay alone weighs each earlier position by its distance;
``position=rope`` and ``alibi`` are refused, as for the other recurrences) and the swish output gate (the
block's MLP follows). Only the causal D is the paper's retention: ``causal=True`` only.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor

from attention_lab.attention.functional import AttentionOutput
from attention_lab.attention.mamba2 import ssd_chunked, ssd_map
from attention_lab.attention.recurrent import Recurrence
from attention_lab.attention.registry import register

NORM_EPS = 1e-6  # of the per-head GroupNorm (torchscale's layernorm_eps)


def retention_decays(num_heads: int) -> Tensor:
    """γ_h = 1 − 2^(−5−h), h = 0..H−1: (H,). Fixed, not learned (the paper's multi-scale retention)."""
    return 1.0 - 2.0 ** (-5.0 - torch.arange(num_heads, dtype=torch.float64))


@register("retnet")
class RetNet(Recurrence):
    """Retention per head: S_n = γ_h S_{n−1} + k_nᵀ v_n, o_n = q_n S_n, γ_h = 1 − 2^(−5−h) fixed, k scaled by 1/√d;
    the parallel form (Q Kᵀ ∘ D) V up to `chunk` positions, the chunkwise form beyond; then GroupNorm per head (no
    affine); no xPos rotation, no swish gate; weights: Q Kᵀ ∘ D, D[n, m] = γ^(n−m), signed, not normalised;
    `causal=True` only.

    W_query, W_key, W_value, a fixed decay per head, retention, a per-head GroupNorm, out_proj.
    """

    origin = "Sun et al. 2023, *Retentive Network* (RetNet)"
    summary = (
        "retention: (Q Kᵀ ∘ D) V, D a fixed decay γ_h = 1 − 2^(−5−h) per head, then a norm per head; `mask=causal` "
        "only"
    )

    kind = "retention"
    options = ("chunk",)  # no short convolution: its state is the retention state S alone (Recurrence.state_size)
    positions_note = "its decay already weighs each earlier position by its distance (the paper's xPos rotation is left out)"

    def own_parameters(self, d_in: int) -> None:
        self.register_buffer("log_decay", retention_decays(self.num_heads).log().float(), persistent=False)  # log γ_h: (H,)

    def keys(self, source: Tensor) -> Tensor:
        return super().keys(source) / math.sqrt(self.head_dim)  # (B, H, T, d), scaled by 1/√d

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool) -> AttentionOutput:
        # q, k, v: (B, H, T, d); mask: (B, 1, 1, T) from key padding, or None.
        self.check_key_mask(mask)
        b, h, t, _ = q.shape
        keep = q.new_ones(b, 1, t) if mask is None else mask[:, 0].to(q.dtype)  # (B, 1, T)
        # A hidden position is skipped: it decays nothing (log γ · 0) and writes nothing (step 0).
        log_decay = self.log_decay.to(q.dtype)[:, None] * keep  # (B, H, T)
        step = keep.expand(b, h, t)  # (B, H, T)
        # The map Q Kᵀ ∘ D (the parallel form), or the chunkwise form past a chunk; then each head's norm.
        retained = self.mix(lambda: ssd_map(log_decay, k, q, step), v,
                            lambda: ssd_chunked(v, log_decay, k, q, step, self.chunk), need_weights)
        return AttentionOutput(self.group_norm(retained.context), retained.weights)

    @staticmethod
    def group_norm(context: Tensor) -> Tensor:
        """(B, H, T, d_v): each head at each position to mean 0 and variance 1 (GroupNorm, a group per head)."""
        return F.layer_norm(context, context.shape[-1:], eps=NORM_EPS)
