"""Mamba-2 (Dao & Gu 2024, "Transformers are SSMs": structured state space duality, SSD).

Per head, a state h (d × d) that each position decays by a scalar and writes into:

    h_t = exp(Δ_t A) h_{t-1} + Δ_t B_t x_tᵀ,    y_t = h_tᵀ C_t

with A < 0 one learned number per head and Δ_t = softplus(W_dt x_t + b) > 0 the step size of that head at that
position. Unrolled, y = M X with the T × T matrix

    M = L ∘ (C Bᵀ) · diag(Δ),    L[i, j] = exp(Σ_{k=j+1..i} Δ_k A) for j <= i, 0 above the diagonal,

attention's form with the decay L in place of the softmax: the "dual" of the recurrence. The names follow that
duality: C comes from ``W_query``, B from ``W_key``, X from ``W_value`` (the values). As in Mamba-2, B and C are
shared by the heads of a group (``ngroups`` groups of consecutive heads, the paper's default one: every head reads
the same B and C, and only X, Δ and A are its own; ``ngroups`` = the number of heads gives each head its own B and
C, as multi-head attention has its own keys and queries). The weights path returns
M (the map the output is computed from, through ``hook_weights``); the fast path is that quadratic form up to
``chunk`` positions, and the chunked form of ``ssd_minimal.py`` (state-spaces/mamba) beyond: M's blocks within
each chunk, and the state passed from chunk to chunk, so time grows linearly in T.

As in Mamba-2, X, B and C first pass a short causal depthwise convolution and SiLU (``short_conv`` taps;
0: none): it gives a head the previous-token step that recall tasks need (see :mod:`.short_conv`). M maps the
convolved values to the output, as ``conv``'s map does. A recurrence is causal or nothing: ``causal=True`` only.

Left out of Mamba-2's layer (the lab's block around the mixer has a norm and an MLP of its own):

* the output gate z (y ⊙ SiLU(z)), the RMSNorm before ``out_proj`` and the skip D·x;
* the expansion (``expand`` = 2: X twice the model's width): here X is the model's width, split into the heads;
* a state width of its own (``d_state`` N, 64 to 128 in the paper): here N = the head width, so a head's state
  is d_h × d_h, and B and C are d_h wide per group;
* one fused input projection (x -> z, X, B, C, Δ): here separate ones (``W_query``, ``W_key``, ``W_value``,
  ``W_dt``), the same linear maps; Δ's limits (``dt_limit``).
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attention_lab.attention.arguments import check_positive_int
from attention_lab.attention.errors import AttentionArgumentError
from attention_lab.attention.functional import AttentionOutput
from attention_lab.attention.recurrent import SHORT_CONV, Recurrence
from attention_lab.attention.registry import register

STEP_RANGE = (1e-3, 1e-1)  # Δ at initialisation, log-uniform per head (Mamba-2's dt_min, dt_max)
NGROUPS = 1  # groups of heads sharing B and C (Mamba-2's ngroups, its default)


def step_size_bias(num_heads: int) -> Tensor:
    """b with softplus(b) log-uniform in STEP_RANGE: each head starts with its own time scale (Mamba-2's init)."""
    low, high = (math.log(s) for s in STEP_RANGE)
    step = torch.exp(torch.rand(num_heads) * (high - low) + low)
    return step + torch.log(-torch.expm1(-step))  # softplus⁻¹(step)


def segsum(a: Tensor) -> Tensor:
    """(..., T) -> (..., T, T): S[i, j] = Σ_{k=j+1..i} a_k for j <= i (0 on the diagonal), -inf above it.

    Summed within each column rather than as a difference of two prefix sums, which would cancel large numbers
    (ssd_minimal.py's ``segsum``)."""
    t = a.shape[-1]
    on_or_below = torch.ones(t, t, dtype=torch.bool, device=a.device).tril()
    terms = a[..., :, None].expand(*a.shape, t).masked_fill(~on_or_below.tril(-1), 0.0)  # [i, j] = a_i where i > j
    return terms.cumsum(dim=-2).masked_fill(~on_or_below, float("-inf"))


def ssd_map(a: Tensor, b: Tensor, c: Tensor, step: Tensor) -> Tensor:
    """M = exp(segsum(a)) ∘ (C Bᵀ) · diag(Δ): a = ΔA (B, H, T), B and C (B, H, T, d), Δ (B, H, T) -> (B, H, T, T)."""
    return torch.exp(segsum(a)) * (c @ b.transpose(-2, -1)) * step[..., None, :]


def ssd_chunked(x: Tensor, a: Tensor, b: Tensor, c: Tensor, step: Tensor, chunk: int) -> Tensor:
    """y = M X without forming M (ssd_minimal.py's ``ssd_minimal_discrete``): X (B, H, T, d_v) -> (B, H, T, d_v).

    1. within each chunk, its block of M; 2. each chunk's own final state; 3. the states passed along the chunks,
    each decayed by the chunk it crosses; 4. what each position reads from the state its chunk starts with.
    """
    t = x.shape[-2]
    pad = -t % chunk  # a = 0 and zero inputs at the end: decay nothing, write nothing
    x, b, c = (F.pad(z, (0, 0, 0, pad)) for z in (x * step[..., None], b, c))
    a = F.pad(a, (0, pad))
    n = (t + pad) // chunk
    x, b, c = (z.unflatten(2, (n, chunk)) for z in (x, b, c))  # (B, H, N, C, .)
    a = a.unflatten(2, (n, chunk))  # (B, H, N, C)
    a_cumsum = a.cumsum(dim=-1)
    within = (torch.exp(segsum(a)) * (c @ b.transpose(-2, -1))) @ x  # 1. (B, H, N, C, d_v)
    to_end = torch.exp(a_cumsum[..., -1:] - a_cumsum)  # (B, H, N, C): decay from each position to its chunk's end
    states = (b * to_end[..., None]).transpose(-2, -1) @ x  # 2. (B, H, N, d, d_v)
    states = torch.cat([torch.zeros_like(states[:, :, :1]), states], dim=2)  # nothing before the first chunk
    across = torch.exp(segsum(F.pad(a_cumsum[..., -1], (1, 0))))  # 3. (B, H, N + 1, N + 1) chunk-to-chunk decays
    states = torch.einsum("bhzn,bhnde->bhzde", across, states)[:, :, :-1]  # (B, H, N, d, d_v): each chunk's start
    from_state = (c @ states) * torch.exp(a_cumsum)[..., None]  # 4. (B, H, N, C, d_v)
    return (within + from_state).flatten(2, 3)[:, :, :t]


@register("mamba2")
class Mamba2(Recurrence):
    """Per head h_t = exp(Δ_t A) h_{t−1} + Δ_t B_t x_tᵀ, y_t = h_tᵀ C_t (C, B, X from `W_query`, `W_key`, `W_value`;
    Δ = softplus(`W_dt` x)), after a short causal convolution; the quadratic dual form up to `chunk` positions, the
    chunked SSD form beyond; weights: M = L ∘ (C Bᵀ) · diag(Δ), L[i, j] = exp(Σ_{j<k≤i} Δ_k A); `causal=True` only.

    W_query (C) and W_key (B), one d_h-wide part per group of heads (`ngroups`, default 1: all heads share them),
    W_value (X), W_dt (Δ) and A per head, a short convolution, the SSD mixer, out_proj.
    """

    origin = "Dao & Gu 2024, *Transformers are SSMs* (Mamba-2)"
    summary = "a state space model: y = (L ∘ C Bᵀ) X, L a learned decay per head; `mask=causal` only"

    kind = "ssm"
    positions_note = "its decay already weighs each earlier position by its distance, and it forms no scores to rotate or bias"
    options = ("chunk", "short_conv", "ngroups")

    @classmethod
    def options_before(cls, num_heads: int) -> dict[str, Any]:
        return {"ngroups": num_heads}  # before the groups, each head had its own B and C

    @classmethod
    def state_size(cls, d_model: int, num_heads: int, seq_len: int, short_conv: int = SHORT_CONV,
                   ngroups: int = NGROUPS, **options) -> int:
        """Per head h (d_h × d_h), and the short convolution's last ``short_conv`` − 1 inputs of X (d_model wide),
        B and C (d_h per group each)."""
        d_head = d_model // num_heads
        return num_heads * d_head * d_head + max(short_conv - 1, 0) * (d_model + 2 * ngroups * d_head)

    def __init__(self, d_in: int, d_out: int, *, ngroups: int = NGROUPS, **common) -> None:
        check_positive_int("ngroups", ngroups)
        heads = common.get("num_heads", 1)
        if isinstance(heads, int) and heads > 0 and heads % ngroups:
            why = "each group is a whole number of heads"
            message = f"ngroups={ngroups} is not possible for 'mamba2' with num_heads={heads}: {why}"
            raise AttentionArgumentError("ngroups", ngroups, f"a divisor of num_heads={heads}", message, reason=why)
        self.ngroups = ngroups  # read by key_heads while Recurrence makes W_query and W_key
        super().__init__(d_in, d_out, **common)

    @property
    def key_heads(self) -> int:
        return self.ngroups  # W_query and W_key: C and B, one per group

    def by_group(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape  # (B, T, G * d) -> (B, G, T, d)
        return x.view(b, t, self.ngroups, -1).transpose(1, 2)

    def own_parameters(self, d_in: int) -> None:
        self.W_dt = nn.Linear(d_in, self.num_heads)  # Δ = softplus(W_dt x + b), one per head
        with torch.no_grad():
            self.W_dt.bias.copy_(step_size_bias(self.num_heads))
        self.A_log = nn.Parameter(torch.empty(self.num_heads).uniform_(1, 16).log())  # A = -exp(A_log) in [-16, -1]

    def keys(self, source: Tensor) -> Tensor:
        # The keys carry the step sizes' pre-activations as more features, those of the group's H/G heads: what a
        # position writes (B_t) and how far it moves each head's state on (Δ_t) are decided at the same position.
        # attend() takes them off again.
        b, t, _ = source.shape
        step = self.W_dt(source).view(b, t, self.ngroups, -1).transpose(1, 2)  # (B, G, T, H/G)
        return torch.cat([self.by_group(self.W_key(source)), step], dim=-1)  # (B, G, T, d + H/G)

    def project(self, x: Tensor, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # As Recurrence.project, the keys first; C and B per group. (B, G, T, d), (B, G, T, d + H/G), (B, H, T, d_v)
        keys = self.keys(source)
        return self.by_group(self.W_query(x)), keys, self.split_heads(self.W_value(source))

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool) -> AttentionOutput:
        # q: C (B, G, T, d); k: B and the group's Δ pre-activations (B, G, T, d + H/G); v: X (B, H, T, d);
        # mask: (B, 1, 1, T) or None.
        per_group = self.num_heads // self.ngroups
        c, b, x = self.convolve((q, k[..., :-per_group], v), mask)
        c, b = (z.repeat_interleave(per_group, dim=1) for z in (c, b))  # head h reads group h // (H/G): (B, H, T, d)
        step = F.softplus(k[..., -per_group:].transpose(-2, -1).flatten(1, 2))  # Δ: (B, H, T), head g·H/G + j
        if mask is not None:
            step = step * mask[:, 0]  # a hidden position is skipped: Δ = 0 decays nothing and writes nothing
        a = step * -torch.exp(self.A_log)[:, None]  # ΔA < 0: (B, H, T)
        # The quadratic (dual) form M X, or the chunked SSD form past a chunk.
        return self.mix(lambda: ssd_map(a, b, c, step), x, lambda: ssd_chunked(x, a, b, c, step, self.chunk),
                        need_weights)
