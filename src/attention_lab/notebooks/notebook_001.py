"""001 - "Attention in Transformers" (StatQuest style).

2-d encodings of three tokens, torch.manual_seed(42) before each model; self, masked self,
encoder-decoder and multi-head attention.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attention_lab.attention import AttentionModule, build_attention, causal_mask
from attention_lab.notebooks.example import Example
from attention_lab.notebooks.weights import seeded, single_head

NOTEBOOK = "001"
TITLE = "Attention in Transformers: self, masked, encoder-decoder, multi-head"

ENCODINGS = [[1.16, 0.23], [0.57, 1.36], [4.41, -2.16]]


def encodings() -> Tensor:
    return torch.tensor(ENCODINGS)


def model(variant: str = "self", **options: Any) -> AttentionModule:
    """As the notebook: torch.manual_seed(42), then the model (d_model = 2)."""
    with seeded(42):
        return build_attention(variant, d_in=2, d_out=2, **options)


def sims() -> Tensor:
    q, k, _ = single_head(model(), encodings())
    return q @ k.T


def scaled_sims() -> Tensor:
    q, k, _ = single_head(model(), encodings())
    return (q @ k.T) / q.shape[-1] ** 0.5  # the scale attend() applies by default


SELF_OUTPUT = [[1.0100, 1.0641], [0.2040, 0.7057], [3.4989, 2.2427]]
WEIGHTS = [[0.3573, 0.4011, 0.2416], [0.3410, 0.6047, 0.0542], [0.0722, 0.0320, 0.8959]]

EXAMPLES = [
    Example("001 SelfAttention", NOTEBOOK, SELF_OUTPUT, lambda: model()(encodings()).context),
    Example("001 W_q weight transposed", NOTEBOOK, [[0.5406, -0.1657], [0.5869, 0.6496]],
            lambda: model().W_query.weight.T),
    Example("001 W_k weight transposed", NOTEBOOK, [[-0.1549, -0.3443], [0.1427, 0.4153]],
            lambda: model().W_key.weight.T),
    Example("001 W_v weight transposed", NOTEBOOK, [[0.6233, 0.6146], [-0.5188, 0.1323]],
            lambda: model().W_value.weight.T),
    Example("001 queries q", NOTEBOOK, [[0.7621, -0.0428], [1.1063, 0.7890], [1.1164, -2.1336]],
            lambda: single_head(model(), encodings())[0]),
    Example("001 keys k", NOTEBOOK, [[-0.1469, -0.3038], [0.1057, 0.3685], [-0.9914, -2.4152]],
            lambda: single_head(model(), encodings())[1]),
    Example("001 values v", NOTEBOOK, [[0.6038, 0.7434], [-0.3502, 0.5303], [3.8695, 2.4246]],
            lambda: single_head(model(), encodings())[2]),
    Example("001 sims q·kᵀ", NOTEBOOK,
            [[-0.0990, 0.0648, -0.6523], [-0.4022, 0.4078, -3.0024], [0.4842, -0.6683, 4.0461]], sims),
    Example("001 scaled sims", NOTEBOOK,
            [[-0.0700, 0.0458, -0.4612], [-0.2844, 0.2883, -2.1230], [0.3424, -0.4725, 2.8610]], scaled_sims),
    Example("001 attention percents", NOTEBOOK, WEIGHTS,
            lambda: model()(encodings(), need_weights=True).weights[0]),
    Example("001 attention percents · v", NOTEBOOK, SELF_OUTPUT,
            lambda: model()(encodings(), need_weights=True).context),
    # The notebook's mask is True where a token may NOT look (masked_fill); the library's is the opposite.
    Example("001 causal mask (True = masked)", NOTEBOOK,
            [[False, True, True], [False, False, True], [False, False, False]], lambda: ~causal_mask(3, 3),
            decimals=None),
    Example("001 MaskedSelfAttention", NOTEBOOK, [[0.6038, 0.7434], [-0.0062, 0.6072], [3.4989, 2.2427]],
            lambda: model(causal=True)(encodings()).context),
    # The notebook fills the masked scores with -1e9 (the library uses -inf); the kept ones, printed to 5 digits:
    Example("001 masked scaled sims (kept entries)", NOTEBOOK,
            [-6.9975e-02, -2.8442e-01, 2.8833e-01, 3.4241e-01, -4.7253e-01, 2.8610e00],
            lambda: scaled_sims()[causal_mask(3, 3)], scientific=True),
    Example("001 masked attention percents", NOTEBOOK,
            [[1.0, 0.0, 0.0], [0.3606, 0.6394, 0.0], [0.0722, 0.0320, 0.8959]],
            lambda: model(causal=True)(encodings(), need_weights=True).weights[0]),
    Example("001 Attention (encoder-decoder)", NOTEBOOK, SELF_OUTPUT,
            lambda: model("cross")(encodings(), source=encodings()).context),
    Example("001 MultiHeadAttention, 1 head", NOTEBOOK, SELF_OUTPUT,
            lambda: model("multihead_concat", num_heads=1)(encodings()).context),
    Example("001 MultiHeadAttention, 3 heads", NOTEBOOK,
            [[1.0100, 1.0641, -0.7081, -0.8268, 0.6226, 0.1312],
             [0.2040, 0.7057, -0.7417, -0.9193, 0.5522, 0.2499],
             [3.4989, 2.2427, -0.7190, -0.8447, 0.5669, 0.2324]],
            lambda: model("multihead_concat", num_heads=3)(encodings()).context),
]
