"""004 - the computation of notebook 000 again, then three heads of torch.rand weights.

The notebook prints only the shapes of the multi-head projections; the last example checks, in
addition, that each head of the library's module is :func:`attend` on that head's projections.
"""

from __future__ import annotations

import torch

from attention_lab.attention import AttentionModule, attend
from attention_lab.notebooks.example import Example
from attention_lab.notebooks.notebook_000 import (
    D_EMBED,
    D_QK,
    D_V,
    HEADS_004,
    embedded_sentence,
    examples_life_is_short,
    rand_weights,
)
from attention_lab.notebooks.weights import blank, load_weights, projections, shape

NOTEBOOK = "004"
TITLE = "Scaled dot-product attention, single and multi-head (Life is short, eat dessert first)"


def model() -> AttentionModule:
    """`multihead_concat` with 3 heads holding 004's torch.rand(3, d, 16) weights, head by head."""
    module = blank("multihead_concat", d_in=D_EMBED, d_out=D_QK, d_v=D_V, num_heads=HEADS_004)
    w_q, w_k, w_v = rand_weights()[1]
    for h, head in enumerate(module.heads):
        load_weights(head, w_q[h], w_k[h], w_v[h])
    return module


def heads_vs_attend() -> float:
    """Largest difference between the module's head outputs and `attend` on each head's projections."""
    module, x = model(), embedded_sentence()
    context = module(x).context  # (6, 3 * 28): heads side by side
    q, k, v = projections(module, x)  # (3, 6, 24), (3, 6, 24), (3, 6, 28)
    per_head = [attend(q[h], k[h], v[h], need_weights=False).context for h in range(HEADS_004)]
    return float((context - torch.cat(per_head, dim=-1)).abs().max())


EXAMPLES = [
    *examples_life_is_short(NOTEBOOK),
    Example("004 multi-head: multihead_query_2.shape", NOTEBOOK, [3, 24],
            lambda: shape(projections(model(), embedded_sentence())[0][:, 1]), decimals=None),
    Example("004 multi-head: multihead_keys.shape", NOTEBOOK, [3, 6, 24],
            lambda: shape(projections(model(), embedded_sentence())[1]), decimals=None),
    Example("004 multi-head: multihead_values.shape", NOTEBOOK, [3, 6, 28],
            lambda: shape(projections(model(), embedded_sentence())[2]), decimals=None),
    # Not printed by the notebook (it stops at the shapes): each head of the module is `attend` on its projections.
    Example("004 multi-head: heads = attend per head (max diff)", NOTEBOOK, 0.0, heads_vs_attend, decimals=5),
]
