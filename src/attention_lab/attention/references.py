"""The recurrences written out step by step from their papers, in the style of flash-linear-attention's ``naive.py``:
what ``based``, ``gated_deltanet``, ``mamba2`` and ``retnet`` must compute, for the tests to hold their fast paths,
weights paths and maps against; and ``mla``'s attention, a head at a time.

Each ``<variant>_reference(m, x, padding)`` reads only the module's parameters (W_query, W_key, W_value, its gates
and decays, the short convolution's filter, out_proj), never its code paths, and loops over sequences, heads and
positions, in whatever dtype it is given (the tests give float64: a module copied with ``.double()`` and its input).
It returns (context (B, T, D), map (B, H, T, T)), the map the T × T matrix with o = M v per head, from the same
numbers. ``padding`` (B, T), True at a hidden key: a hidden position is left out of every sum and every state.

* ``short_conv_reference``: SiLU(bias + Σ_τ w_τ u_{t−τ}) per channel of u = [W_query x, W_key x, W_value x], as in
  Mamba-2 and fla's ShortConvolution (what based, gated_deltanet and mamba2 put in front of their recurrence).
* ``based_reference``, Arora et al. 2024, §3–4: with q and k after the short convolution and scaled by d'^(−1/4),
  s_ij = q_i·k_j,

      taylor_i = Σ_{j<=i} (1 + s_ij + s_ij²/2) v_j / Σ_{j<=i} (1 + s_ij + s_ij²/2),
      window_i = Σ_{i−w<j<=i} exp(s_ij) v_j / Σ_{i−w<j<=i} exp(s_ij),    o_i = ½ (taylor_i + window_i).

* ``gated_deltanet_reference``, Yang et al. 2025, eq. 10 (``delta_rule``, one head):

      S_t = S_{t−1} (α_t (I − β_t k_t k_tᵀ)) + β_t v_t k_tᵀ,    o_t = S_t q_t,

  q and k L2-normalised (q also scaled by 1/√d, as fla's layer). The output is linear in the values, so column j
  of M is the output for v = e_j (the value 1 at position j, 0 elsewhere).
* ``mamba2_reference``, Dao & Gu 2024, the selective SSM: h_t = exp(Δ_t A) h_{t−1} + Δ_t B_t x_tᵀ, y_t = h_tᵀ C_t;
  M[i, j] = (C_i·B_j) Δ_j Π_{k=j+1..i} exp(Δ_k A); B and C those of the head's group (§7.2, ``ngroups`` groups
  of consecutive heads: head h reads group h // (H / ngroups)), Δ, A and X the head's own.
* ``retnet_reference``, Sun et al. 2023, eq. 1 and 6–8: S_n = γ_h S_{n−1} + k_nᵀ v_n, o_n = q_n S_n,
  γ_h = 1 − 2^(−5−h), k scaled by 1/√d, then GroupNorm per head (mean 0, variance 1 over each head's d_v at each
  position, no affine); (Q Kᵀ ∘ D)[n, m] = γ^(n−m) q_n·k_m.
* ``mla_reference``, DeepSeek-AI 2024 (DeepSeek-V2), eq. 9–19 and the RMSNorm on the latents of section 3.1.2:

      c_KV = RMSNorm(W_DKV h),  k_C = W_UK c_KV,  v_C = W_UV c_KV,  k_R = RoPE(W_KR h)    (one k_R for all heads)
      c_Q = RMSNorm(W_DQ h) (or h),  q_C = W_UQ c_Q,  q_R = RoPE(W_QR c_Q)
      o_h = softmax([q_C,h; q_R,h]·[k_C,h; k_R]ᵀ / √(d_h + d_h^R)) v_C,h,   output = W_O [o_1; ...; o_H]

  RMSNorm(c) = c / √(mean(c²) + ε) · g (g the learned scale), where the module has it (``latent_norm``). RoPE
  here rotates feature i with feature i + d/2 by position · 10000^(−2i/d) (the lab's rotate-half convention).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attention_lab.attention.mla import LATENT_NORM_EPS


def kept(x: Tensor, padding: Tensor | None) -> Tensor:
    """(B, T, 1) in x's dtype: 1 at a visible position, 0 at a hidden one."""
    if padding is None:
        return torch.ones(*x.shape[:2], 1, dtype=x.dtype)
    return (~padding)[..., None].to(x.dtype)


def short_conv_reference(m: nn.Module, x: Tensor, keep: Tensor) -> Tensor:
    """SiLU(bias + Σ_τ w_τ u_{t-τ}) per channel of u = [W_query x, W_key x, W_value x], hidden inputs zeroed."""
    u = torch.cat([m.W_query(x), m.W_key(x), m.W_value(x)], dim=-1) * keep  # (B, T, 3D)
    conv = m.short_conv.conv
    if conv is None:
        return u
    taps = conv.weight.shape[-1]
    out = conv.bias.expand_as(u).clone()
    for tau in range(taps):  # lag tau reads u_{t - tau}; the filter's last tap is lag 0 (cross-correlation)
        shifted = F.pad(u, (0, 0, tau, 0))[:, : u.shape[1]]
        out = out + conv.weight[:, 0, taps - 1 - tau] * shifted
    return F.silu(out)


def based_reference(m: nn.Module, x: Tensor, padding: Tensor | None) -> tuple[Tensor, Tensor]:
    """Position by position: (context (B, T, D), map (B, H, T, T))."""
    b, t, d = x.shape
    heads, f, p = m.num_heads, m.feature_dim, d // m.num_heads
    keep = kept(x, padding)
    q, k, v = short_conv_reference(m, x, keep).split([heads * f, heads * f, d], dim=-1)
    q, k = (z.view(b, t, heads, f) / f**0.25 for z in (q, k))  # (B, T, H, d')
    v = v.view(b, t, heads, p)
    visible = keep[..., 0].bool()
    weights = torch.zeros(b, heads, t, t, dtype=x.dtype)
    for n in range(b):
        for h in range(heads):
            for i in range(t):
                seen = visible[n, : i + 1].clone()  # the keys j <= i that are not hidden
                if not seen.any():
                    continue
                s = k[n, : i + 1, h] @ q[n, i, h]  # (i + 1,)
                kernel = (1 + s + s**2 / 2) * seen
                row = kernel / kernel.sum()
                if m.window_size:
                    near = seen & (torch.arange(i + 1) > i - m.window_size)
                    exp = torch.exp(s) * near
                    row = (row + exp / exp.sum()) / 2
                weights[n, h, i, : i + 1] = row
    y = (weights @ v.transpose(1, 2)).transpose(1, 2)  # (B, T, H, P): o_i = Σ_j map[i, j] v_j
    return m.out_proj(y.reshape(b, t, d)), weights


def delta_rule(q: Tensor, k: Tensor, v: Tensor, alpha: Tensor, beta: Tensor) -> Tensor:
    """One head, one sequence: q, k (T, d), v (T, d_v), α, β (T,) -> o (T, d_v), by the paper's recurrence."""
    t, d = k.shape
    state = torch.zeros(v.shape[1], d, dtype=v.dtype)  # S: (d_v, d)
    eye = torch.eye(d, dtype=v.dtype)
    out = []
    for i in range(t):
        state = state @ (alpha[i] * (eye - beta[i] * torch.outer(k[i], k[i]))) + beta[i] * torch.outer(v[i], k[i])
        out.append(state @ q[i])
    return torch.stack(out)


def gated_deltanet_reference(m: nn.Module, x: Tensor, padding: Tensor | None) -> tuple[Tensor, Tensor]:
    """(context (B, T, D), map (B, H, T, T)) by ``delta_rule``, a head at a time."""
    b, t, d = x.shape
    heads, p = m.num_heads, d // m.num_heads
    keep = kept(x, padding)
    q, k, v = (z.view(b, t, heads, p) for z in short_conv_reference(m, x, keep).split(d, dim=-1))
    q = q / q.norm(dim=-1, keepdim=True).clamp_min(1e-6) / math.sqrt(p)
    k = k / k.norm(dim=-1, keepdim=True).clamp_min(1e-6)
    alpha = torch.exp(-torch.exp(m.A_log) * F.softplus(m.W_alpha(x)))  # (B, T, H) in (0, 1)
    beta = torch.sigmoid(m.W_beta(x))
    alpha = torch.where(keep.bool(), alpha, torch.ones_like(alpha))  # a hidden position keeps the state ...
    beta = beta * keep  # ... and writes nothing
    y = torch.zeros(b, t, heads, p, dtype=x.dtype)
    weights = torch.zeros(b, heads, t, t, dtype=x.dtype)
    for n in range(b):
        for h in range(heads):
            args = q[n, :, h], k[n, :, h]
            y[n, :, h] = delta_rule(*args, v[n, :, h], alpha[n, :, h], beta[n, :, h])
            unit = torch.eye(t, dtype=x.dtype)  # the values e_j, one column per position
            weights[n, h] = delta_rule(*args, unit, alpha[n, :, h], beta[n, :, h])
    return m.out_proj(y.reshape(b, t, d)), weights


def mamba2_reference(m: nn.Module, x: Tensor, padding: Tensor | None) -> tuple[Tensor, Tensor]:
    """The recurrence in loops: (context (B, T, D), map (B, H, T, T))."""
    b, t, d = x.shape
    heads, p, groups = m.num_heads, d // m.num_heads, m.ngroups
    keep = kept(x, padding)
    c, bb, xx = short_conv_reference(m, x, keep).split([groups * p, groups * p, d], dim=-1)
    c, bb = (z.view(b, t, groups, p) for z in (c, bb))  # (B, T, G, N), N = P
    xx = xx.view(b, t, heads, p)  # (B, T, H, P)
    step = F.softplus(m.W_dt(x)) * keep  # (B, T, H): a hidden position is skipped
    a = -torch.exp(m.A_log)  # (H,)
    y = torch.zeros(b, t, heads, p, dtype=x.dtype)
    weights = torch.zeros(b, heads, t, t, dtype=x.dtype)
    for n in range(b):
        for h in range(heads):
            g = h // (heads // groups)  # the group whose B and C head h reads
            state = torch.zeros(p, p, dtype=x.dtype)  # (N, P)
            for i in range(t):
                state = torch.exp(step[n, i, h] * a[h]) * state + step[n, i, h] * torch.outer(bb[n, i, g], xx[n, i, h])
                y[n, i, h] = state.T @ c[n, i, g]
                # Row i, every j <= i at once: M[i, j] = (C_i·B_j) Δ_j Π_{k=j+1..i} exp(Δ_k A), the product's
                # exponent the sum of the steps after j up to i (the steps from j on, less Δ_j)
                steps = step[n, : i + 1, h]  # (i + 1,)
                after = steps.flip(0).cumsum(0).flip(0) - steps
                weights[n, h, i, : i + 1] = torch.exp(a[h] * after) * (bb[n, : i + 1, g] @ c[n, i, g]) * steps
    return m.out_proj(y.reshape(b, t, d)), weights


def retnet_reference(m: nn.Module, x: Tensor, padding: Tensor | None) -> tuple[Tensor, Tensor]:
    """The recurrence in loops, then the norm per head: (context (B, T, D), map (B, H, T, T))."""
    b, t, d = x.shape
    heads, p = m.num_heads, d // m.num_heads
    visible = kept(x, padding)[..., 0].bool()
    q, k, v = (w(x).view(b, t, heads, p) for w in (m.W_query, m.W_key, m.W_value))  # (B, T, H, P)
    k = k / p**0.5
    y = torch.zeros(b, t, heads, p, dtype=x.dtype)
    weights = torch.zeros(b, heads, t, t, dtype=x.dtype)
    for n in range(b):
        for h in range(heads):
            gamma = 1 - 2 ** (-5 - h)
            state = torch.zeros(p, p, dtype=x.dtype)  # (d, d_v)
            for i in range(t):
                if visible[n, i]:
                    state = gamma * state + torch.outer(k[n, i, h], v[n, i, h])
                out = q[n, i, h] @ state
                y[n, i, h] = (out - out.mean()) / torch.sqrt(out.var(unbiased=False) + 1e-6)  # GroupNorm, no affine
                # Row i, every visible j <= i at once: γ to the number of visible steps after j up to i
                seen = visible[n, : i + 1].to(x.dtype)  # (i + 1,)
                after = seen.flip(0).cumsum(0).flip(0) - seen
                weights[n, h, i, : i + 1] = gamma**after * (k[n, : i + 1, h] @ q[n, i, h]) * seen
    return m.out_proj(y.reshape(b, t, d)), weights


def rope_reference(x: Tensor) -> Tensor:
    """x (..., T, d): position t's pair (i, i + d/2) rotated by t · 10000^(−2i/d), written out."""
    t, d = x.shape[-2], x.shape[-1]
    out = x.clone()
    for pos in range(t):
        for i in range(d // 2):
            angle = pos * 10000 ** (-2 * i / d)
            a, b = x[..., pos, i], x[..., pos, i + d // 2]
            out[..., pos, i] = a * math.cos(angle) - b * math.sin(angle)
            out[..., pos, i + d // 2] = a * math.sin(angle) + b * math.cos(angle)
    return out


def rms_norm_reference(c: Tensor, norm: nn.Module | None) -> Tensor:
    """c / √(mean(c²) + ε) · g over the last dim; c itself where the module has no norm there."""
    if norm is None:
        return c
    return c / torch.sqrt((c**2).mean(dim=-1, keepdim=True) + LATENT_NORM_EPS) * norm.weight


def mla_reference(m: nn.Module, x: Tensor, *, causal: bool) -> Tensor:
    """Each head's softmax attention over the latent keys and values, from the module's parameters: (B, T, D)."""
    t = x.shape[1]
    d, r = m.head_dim, m.rope_dim
    c_q = x if m.W_q_down is None else rms_norm_reference(m.W_q_down(x), m.q_norm)
    c_kv = rms_norm_reference(m.W_kv_down(x), m.kv_norm)  # (B, T, d_c)
    k_c, v_c, q_c = m.W_key(c_kv), m.W_value(c_kv), m.W_query(c_q)
    k_r = rope_reference(m.W_key_rope(x)) if r else None  # (B, T, d_h^R), shared by the heads, not normalised
    q_r = m.W_query_rope(c_q) if r else None
    heads = []
    for h in range(m.num_heads):
        q, k = q_c[..., h * d:(h + 1) * d], k_c[..., h * d:(h + 1) * d]
        if r:
            q = torch.cat([q, rope_reference(q_r[..., h * r:(h + 1) * r])], dim=-1)
            k = torch.cat([k, k_r], dim=-1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(d + r)
        if causal:
            scores = scores.masked_fill(torch.ones(t, t, dtype=torch.bool).triu(1), float("-inf"))
        heads.append(torch.softmax(scores, dim=-1) @ v_c[..., h * d:(h + 1) * d])
    return m.out_proj(torch.cat(heads, dim=-1))
