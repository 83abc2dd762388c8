"""Gated attention (Qiu et al. 2025, "Gated Attention for Large Language Models: Non-linearity, Sparsity, and
Attention-Sink-Free"): ``multihead`` with a sigmoid gate on each head's output, before ``out_proj``:

    Y' = Y ⊙ σ(X W_θ)

Y is a head's softmax-attention output (B, H, T, d_v), X the layer's input at the same positions (after the block's
norm). ``gate=elementwise`` (the paper's best) gives every dimension of every head its own gate, W_θ: d_in × d_out;
``gate=headwise`` one scalar per head, W_θ: d_in × H. The gate is applied in ``gate_heads``, before
``hook_head_output``: the head outputs that hooks read, ablate or patch are the gated ones, what ``out_proj`` mixes.
The attention map is multihead's (the gate acts after it), so the weights path, the fused path and ``sink`` are as
there. The mean gate per head of the last training batch is logged (``gated/gate/layer<l>/head<h>``).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attention_lab.attention.arguments import check_split_heads
from attention_lab.attention.errors import AttentionArgumentError
from attention_lab.attention.multihead import MultiHeadAttention
from attention_lab.attention.registry import register


@register("gated")
class GatedAttention(MultiHeadAttention):
    """`multihead`, then each head's output Y (B, H, T, d_v) times σ(X W_gate): Y ⊙ σ(X W_θ), one gate per head
    dimension (`gate="elementwise"`) or per head (`"headwise"`), before `hook_head_output` and `out_proj`; weights:
    multihead's softmax map (the gate acts after it); takes `sink`; logs its mean gate per head.

    ``multihead``'s W_query, W_key, W_value, out_proj, and W_gate: the gate's logits from the input.
    """

    origin = "Qiu et al. 2025, *Gated Attention for Large Language Models*"
    summary = (
        "`multihead` with a sigmoid gate on each head's output before `out_proj`: Y ⊙ σ(X W_θ), `gate=elementwise` or "
        "`headwise`"
    )

    takes_source = False
    multi_head = True
    grouped_kv = True
    projects = True
    options = ("gate", "sink")
    choices = {"gate": ("elementwise", "headwise"), "sink": ("none", "zero", "learned")}

    def __init__(self, d_in: int, d_out: int, *, gate: str = "elementwise", **common) -> None:
        if gate not in self.choices["gate"]:  # build_attention checks it first; a direct construction too
            raise AttentionArgumentError("gate", gate, f"one of {', '.join(self.choices['gate'])}")
        check_split_heads("gated", d_out, common.get("num_heads", 1), common.get("d_v"))
        super().__init__(d_in, d_out, **common)
        self.gate = gate
        self.W_gate = nn.Linear(d_in, d_out if gate == "elementwise" else self.num_heads)
        # The mean gate per head over the last training batch, for logged_values (not saved with the model).
        self.register_buffer("mean_gate", torch.full((self.num_heads,), float("nan")), persistent=False)

    def gate_heads(self, context: Tensor, x: Tensor) -> Tensor:
        b, t, _ = x.shape
        logits = self.W_gate(x)  # (B, T, d_out) elementwise, (B, T, H) headwise
        width = self.head_dim if self.gate == "elementwise" else 1
        gate = torch.sigmoid(logits.view(b, t, self.num_heads, width).transpose(1, 2))  # (B, H, T, head_dim or 1)
        if self.training:
            self.mean_gate.copy_(gate.detach().mean(dim=(0, 2, 3)))
        return context * gate  # (B, H, T, d_v)

    def logged_values(self) -> dict[str, float]:
        if bool(self.mean_gate.isnan().any()):  # no training batch yet
            return {}
        return {f"gate/head{h}": float(value) for h, value in enumerate(self.mean_gate)}
