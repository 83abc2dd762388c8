"""Differential attention (Ye et al. 2024, "Differential Transformer").

Each head splits its query and key into two halves (width d/2 each) and subtracts the second softmax map from
the first, so that attention noise common to both cancels:

    DiffAttn(X) = (softmax(Q₁K₁ᵀ/√(d/2)) − λ softmax(Q₂K₂ᵀ/√(d/2))) V,    V of width d,

with one λ per layer, re-parameterised as λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init (four learned vectors of
width d/2) and λ_init = 0.8 − 0.6·exp(−0.3·(l − 1)) for the layer l = 1, 2, ... (``layer``; the model fills it
in). Each head's output passes an RMSNorm and is scaled by (1 − λ_init) before ``out_proj``, as in the paper.

The map is the signed difference: a row sums to 1 − λ and entries can be negative. The weights path returns
it and computes the output through ``hook_weights``; the fast path is two fused softmax attentions, subtracted.
Rope rotates each half on its own (the halves are the paper's 2H heads of width d/2).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attention_lab.attention.alibi import alibi_bias
from attention_lab.attention.arguments import check_positive_int, divisors
from attention_lab.attention.errors import AttentionArgumentError
from attention_lab.attention.functional import AttentionOutput, attend
from attention_lab.attention.multihead import MultiHeadAttention
from attention_lab.attention.registry import register

NORM_EPS = 1e-5  # of the per-head RMSNorm (the reference code's)


def lambda_init(layer: int) -> float:
    """The paper's depth-dependent λ_init for the 1-based layer index ``layer``."""
    return 0.8 - 0.6 * math.exp(-0.3 * (layer - 1))


@register("diff")
class DiffAttention(MultiHeadAttention):
    """`multihead`'s projections, each head's query and key split in two halves: (softmax(Q₁K₁ᵀ/√(d/2)) − λ
    softmax(Q₂K₂ᵀ/√(d/2))) V, λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init, λ_init = 0.8 − 0.6·exp(−0.3·(`layer` −
    1)) (the model fills in `layer`); each head RMSNorm-ed and × (1 − λ_init); two fused softmax kernels; weights:
    the signed difference (rows sum to 1 − λ).

    ``multihead``'s W_query, W_key, W_value and out_proj; two maps per head, subtracted; λ; a per-head norm.
    """

    origin = "Ye et al. 2024, *Differential Transformer*"
    summary = (
        "two softmax maps per head, subtracted: (softmax(Q₁K₁ᵀ) − λ softmax(Q₂K₂ᵀ)) V, λ learned per layer; a signed "
        "map"
    )

    takes_source = False
    multi_head = True
    grouped_kv = True
    projects = True
    kind = "diff"
    options = ("layer",)

    def __init__(self, d_in: int, d_out: int, *, layer: int = 1, **common) -> None:
        check_positive_int("layer", layer)
        num_heads = common.get("num_heads", 1)
        if d_out % (2 * num_heads):  # two halves per head
            why = "each head splits its queries and keys into two halves"
            raise AttentionArgumentError(
                "num_heads", num_heads, f"a divisor of d_out / 2 = {d_out / 2:g}: {divisors(d_out // 2)}",
                f"num_heads ({num_heads}) must divide d_out / 2 ({d_out / 2:g}) for 'diff': {why}", reason=why)
        if common.get("position") == "rope" and (d_out // num_heads) % 4:
            raise AttentionArgumentError(
                "position", "rope", "another position: rope rotates each half-head, and needs d_out / num_heads "
                "to be a multiple of 4", reason="rope rotates pairs within each half of a head")
        super().__init__(d_in, d_out, **common)
        self.layer = layer
        self.lambda_init = lambda_init(layer)
        half = self.head_dim // 2
        # λ's four vectors, drawn N(0, 0.1) as in the reference code: λ starts near λ_init.
        self.lambda_q1, self.lambda_k1, self.lambda_q2, self.lambda_k2 = (
            nn.Parameter(torch.randn(half) * 0.1) for _ in range(4))
        self.head_norm = nn.RMSNorm(self.head_dim, eps=NORM_EPS)  # per head: over each head's d features

    def differential_lambda(self) -> Tensor:
        """λ = exp(λ_q1·λ_k1) − exp(λ_q2·λ_k2) + λ_init: a 0-dim tensor."""
        return (torch.exp(self.lambda_q1 @ self.lambda_k1) - torch.exp(self.lambda_q2 @ self.lambda_k2)
                + self.lambda_init)

    def logged_values(self) -> dict[str, float]:
        """What a training run logs of this module: ``diff/lambda/layer<l>`` (the ``ModuleValues`` callback adds the
        variant and the block's index, 0-based as every tag of the lab)."""
        return {"lambda": float(self.differential_lambda().detach())}

    def project(self, x: Tensor, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # queries and keys: (B, T, H * d) -> (B, 2H, T, d/2), head h's two halves at 2h and 2h + 1: rope (applied
        # by forward() to whatever project() returns) then rotates each half as a head of its own.
        b, t_q, _ = x.shape
        queries = self.W_query(x).view(b, t_q, 2 * self.num_heads, -1).transpose(1, 2)
        keys = self.W_key(source).view(b, source.shape[1], 2 * self.kv_heads, -1).transpose(1, 2)
        return queries, keys, self.split_heads(self.W_value(source), self.kv_heads)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool) -> AttentionOutput:
        # q: (B, 2H, T_q, d/2), k: (B, 2H_kv, T_k, d/2), v: (B, H_kv, T_k, d)
        q1, q2 = q.unflatten(1, (-1, 2)).unbind(2)  # each (B, H, T_q, d/2)
        k1, k2 = k.unflatten(1, (-1, 2)).unbind(2)  # each (B, H_kv, T_k, d/2)
        lam = self.differential_lambda()
        bias = None
        if self.position == "alibi":
            bias = alibi_bias(self.num_heads, q.shape[-2], k.shape[-2], device=q.device, dtype=q.dtype)
        shared = dict(causal=self.causal, mask=mask, window=self.window, bias=bias,
                      dropout_p=self.dropout if self.training else 0.0, enable_gqa=self.kv_heads != self.num_heads)
        if need_weights or self.weights_hooked:  # the signed map, explicitly, and the output through it
            first = attend(q1, k1, v, need_weights=True, **shared).weights  # (B, H, T_q, T_k)
            second = attend(q2, k2, v, need_weights=True, **shared).weights
            weights = self.hook_weights(first - lam * second)  # (B, H, T_q, T_k), signed
            groups = self.num_heads // self.kv_heads  # query head h reads kv head h // groups
            context = weights @ v.repeat_interleave(groups, dim=1)  # (B, H, T_q, d)
        else:  # two fused kernels: softmax(Q₁K₁ᵀ)V − λ softmax(Q₂K₂ᵀ)V
            weights = None
            context = attend(q1, k1, v, need_weights=False, **shared).context
            context = context - lam * attend(q2, k2, v, need_weights=False, **shared).context
        context = self.head_norm(context) * (1.0 - self.lambda_init)  # (B, H, T_q, d)
        return AttentionOutput(context, weights if need_weights else None)
