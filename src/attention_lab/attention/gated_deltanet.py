"""Gated DeltaNet (Yang, Kautz & Hatamizadeh, ICLR 2025, "Gated Delta Networks: Improving Mamba2 with Delta Rule").

Per head, a state S (d_v × d) that each position decays by a gate α_t and corrects by the delta rule:

    S_t = S_{t-1} (α_t (I − β_t k_t k_tᵀ)) + β_t v_t k_tᵀ,    o_t = S_t q_t / √d

with q and k L2-normalised, α_t = exp(−exp(A_log) · softplus(W_alpha x_t + b)) ∈ (0, 1) (Mamba-2's decay) and
β_t = sigmoid(W_beta x_t) ∈ (0, 1) how strongly position t overwrites what the state holds under k_t.

The output is linear in the values, o = M v per head, and M is found from the chunked form (the WY / UT
representation of fla's ``naive.py``) with the whole sequence as one chunk. Write γ_ij = α_{j+1} ⋯ α_i for
j <= i. The state writes u_t = β_t (v_t − α_t S_{t-1} k_t) (what the delta rule adds); unrolling S_{t-1} gives
u_t + Σ_{j<t} β_t γ_tj (k_t·k_j) u_j = β_t v_t, a unit lower-triangular system (I + A) U = diag(β) V, and
o_t = Σ_{j<=t} γ_tj (q_t·k_j) u_j. So

    M = ((Q Kᵀ) ∘ Γ) (I + A)⁻¹ diag(β),    A_ij = β_i γ_ij (k_i·k_j) for j < i, 0 elsewhere,

solved by forward substitution (``solve_triangular``), never inverted. The weights path returns M and computes
the output through ``hook_weights``; M can be negative (the delta rule subtracts). The fast path is M v up to
``chunk`` positions, the chunked form beyond (that system per chunk, the state passed from chunk to chunk).
:func:`gated_delta_recurrent` is the recurrence itself, step by step.

As in fla's GatedDeltaNet layer, q, k and v first pass a short causal depthwise convolution and SiLU
(``short_conv`` taps; 0: none; :mod:`.short_conv`); M maps the convolved values. Left out (the block around it
has them): the output gate and its norm. A recurrence is causal or nothing: ``causal=True`` only.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attention_lab.attention.functional import AttentionOutput
from attention_lab.attention.mamba2 import segsum, step_size_bias
from attention_lab.attention.recurrent import Recurrence
from attention_lab.attention.registry import register

NORM_EPS = 1e-6  # of the L2 normalisation (fla's l2norm)


def unit_lower_solve(a: Tensor, rhs: Tensor) -> Tensor:
    """(I + A)⁻¹ rhs for A strictly lower triangular (..., T, T), by forward substitution."""
    eye = torch.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    return torch.linalg.solve_triangular(a + eye, rhs, upper=False, unitriangular=True)


def delta_map(q: Tensor, k: Tensor, log_alpha: Tensor, beta: Tensor) -> Tensor:
    """M with o = M v: q, k (B, H, T, d) normalised and scaled, log α and β (B, H, T) -> (B, H, T, T)."""
    decay = torch.exp(segsum(log_alpha))  # Γ: (B, H, T, T), γ_ij below the diagonal and on it, 0 above
    a = (beta[..., None] * (k @ k.transpose(-2, -1)) * decay).tril(-1)  # A: (B, H, T, T)
    return ((q @ k.transpose(-2, -1)) * decay) @ unit_lower_solve(a, torch.diag_embed(beta))


def delta_chunked(q: Tensor, k: Tensor, v: Tensor, log_alpha: Tensor, beta: Tensor, chunk: int) -> Tensor:
    """o = M v without forming M: q, k (B, H, T, d), v (B, H, T, d_v), log α, β (B, H, T) -> (B, H, T, d_v).

    Within a chunk that starts from the state S0 (d × d_v here, S's transpose), the writes are
    U = (I + A)⁻¹ (diag(β) V − diag(β ∘ g) K S0), g_t the decay since the chunk began, and
    o = (Q ∘ g) S0 + ((Q Kᵀ) ∘ Γ) U; the state at its end is g_C S0 + Σ_t (g_C / g_t) k_t u_tᵀ.
    """
    t = q.shape[-2]
    pad = -t % chunk  # β = 0 and α = 1 at the end: write nothing, decay nothing
    q, k, v = (F.pad(z, (0, 0, 0, pad)) for z in (q, k, v))
    log_alpha, beta = F.pad(log_alpha, (0, pad)), F.pad(beta, (0, pad))
    n = (t + pad) // chunk
    q, k, v = (z.unflatten(2, (n, chunk)) for z in (q, k, v))  # (B, H, N, C, .)
    log_alpha, beta = log_alpha.unflatten(2, (n, chunk)), beta.unflatten(2, (n, chunk))  # (B, H, N, C)
    decay = torch.exp(segsum(log_alpha))  # (B, H, N, C, C)
    since_start = log_alpha.cumsum(dim=-1)  # (B, H, N, C): log g
    solve = unit_lower_solve((beta[..., None] * (k @ k.transpose(-2, -1)) * decay).tril(-1), torch.cat(
        [beta[..., None] * v, (beta * since_start.exp())[..., None] * k], dim=-1))  # all chunks at once
    u_own, w = solve.split([v.shape[-1], k.shape[-1]], dim=-1)  # (I+A)⁻¹ diag(β) V, (I+A)⁻¹ diag(β∘g) K
    scores = (q @ k.transpose(-2, -1)) * decay  # (B, H, N, C, C)
    q_from_start = q * since_start.exp()[..., None]
    k_to_end = k * torch.exp(since_start[..., -1:] - since_start)[..., None]
    state = q.new_zeros(*q.shape[:2], q.shape[-1], v.shape[-1])  # (B, H, d, d_v)
    outputs = []
    for i in range(n):  # the chunks in order, each from the state the one before it left
        u = u_own[:, :, i] - w[:, :, i] @ state  # (B, H, C, d_v)
        outputs.append(q_from_start[:, :, i] @ state + scores[:, :, i] @ u)
        state = since_start[:, :, i, -1:, None].exp() * state + k_to_end[:, :, i].transpose(-2, -1) @ u
    return torch.stack(outputs, dim=2).flatten(2, 3)[:, :, :t]


def gated_delta_recurrent(q: Tensor, k: Tensor, v: Tensor, log_alpha: Tensor, beta: Tensor) -> Tensor:
    """The recurrence step by step (as the chunked forms, q and k already normalised and scaled): (B, H, T, d_v)."""
    state = q.new_zeros(*q.shape[:2], v.shape[-1], q.shape[-1])  # S: (B, H, d_v, d)
    outputs = []
    for t in range(q.shape[-2]):
        k_t, v_t, b_t = k[:, :, t, :, None], v[:, :, t, :, None], beta[:, :, t, None, None]  # (B, H, d or d_v, 1)
        state = log_alpha[:, :, t, None, None].exp() * (state - b_t * (state @ k_t) @ k_t.transpose(-2, -1))
        state = state + b_t * v_t @ k_t.transpose(-2, -1)
        outputs.append(state @ q[:, :, t, :, None])  # (B, H, d_v, 1)
    return torch.cat(outputs, dim=-1).transpose(-2, -1)


@register("gated_deltanet")
class GatedDeltaNet(Recurrence):
    """Per head a state S_t = S_{t−1} α_t (I − β_t k_t k_tᵀ) + β_t v_t k_tᵀ, o_t = S_t q_t / √d, q and k
    L2-normalised, α_t (decay) and β_t (writing strength) gates per head, after a short causal convolution; chunked
    (WY/UT) form, time linear in T; weights: the implied map M = ((Q Kᵀ) ∘ Γ)(I + A)⁻¹ diag(β), signed;
    `causal=True` only.

    W_query, W_key, W_value, W_alpha (decay), W_beta (writing strength), a short convolution, out_proj.
    """

    origin = "Yang, Kautz & Hatamizadeh 2025, *Gated Delta Networks*"
    summary = "a recurrent state per head, decayed by a gate and corrected by the delta rule; `mask=causal` only"

    kind = "delta"
    positions_note = "its gates already weigh each earlier position, and it forms no scores to rotate or bias"

    def own_parameters(self, d_in: int) -> None:
        self.W_alpha = nn.Linear(d_in, self.num_heads)  # its bias: Mamba-2's step-size initialisation
        self.W_beta = nn.Linear(d_in, self.num_heads)
        with torch.no_grad():
            self.W_alpha.bias.copy_(step_size_bias(self.num_heads))
        # log α = -exp(A_log) · softplus(...): Mamba-2's decay (fla draws A from (0, 16); from 1, as mamba2, no A near 0)
        self.A_log = nn.Parameter(torch.empty(self.num_heads).uniform_(1, 16).log())

    def keys(self, source: Tensor) -> Tensor:
        # The keys carry the two gates' pre-activations as two more features: how much a position keeps (α_t) and
        # how strongly it writes (β_t) are decided where k_t is. attend() takes them off again.
        gates = torch.stack([self.W_alpha(source), self.W_beta(source)], dim=-1).transpose(1, 2)  # (B, H, T, 2)
        return torch.cat([super().keys(source), gates], dim=-1)  # (B, H, T, d + 2)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool) -> AttentionOutput:
        # q: (B, H, T, d); k: keys and the gates' pre-activations (B, H, T, d + 2); v: (B, H, T, d); mask: (B, 1, 1, T).
        q, k_, v = self.convolve((q, k[..., :-2], v), mask)
        q = F.normalize(q, dim=-1, eps=NORM_EPS) / math.sqrt(q.shape[-1])
        k_ = F.normalize(k_, dim=-1, eps=NORM_EPS)
        log_alpha = -torch.exp(self.A_log)[:, None] * F.softplus(k[..., -2])  # log α < 0: (B, H, T)
        beta = torch.sigmoid(k[..., -1])  # (B, H, T)
        if mask is not None:  # a hidden position is skipped: α = 1 keeps the state, β = 0 writes nothing
            log_alpha, beta = log_alpha * mask[:, 0], beta * mask[:, 0]
        # The implied map M v (the parallel form), or the chunked form past a chunk.
        return self.mix(lambda: delta_map(q, k_, log_alpha, beta), v,
                        lambda: delta_chunked(q, k_, v, log_alpha, beta, self.chunk), need_weights)
