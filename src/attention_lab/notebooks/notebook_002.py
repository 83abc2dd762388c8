"""002 - "Attention from scratch" in NumPy.

np.random.seed(42); W_Q, W_K, W_V = np.random.randint(3, size=(3, 3)) each: integer weights,
so the scores are exact and the weights are printed to 8 decimals.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import torch
from torch import Tensor

from attention_lab.attention import AttentionModule, attend
from attention_lab.notebooks.example import Example
from attention_lab.notebooks.weights import blank, load_weights, single_head

NOTEBOOK = "002"
TITLE = "Attention from scratch in NumPy"

WORDS = [[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1]]
# What the notebook printed: golden values for the regeneration below.
W_Q = [[2, 0, 2], [2, 0, 0], [2, 1, 2]]
W_K = [[2, 2, 2], [0, 2, 1], [0, 1, 1]]
W_V = [[1, 1, 0], [0, 1, 1], [0, 0, 0]]


@cache
def weights() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Regenerate W_Q, W_K, W_V with NumPy's legacy generator (what np.random.seed seeds)."""
    rng = np.random.RandomState(42)
    return tuple(rng.randint(3, size=(3, 3)) for _ in range(3))


def words() -> Tensor:
    return torch.tensor(WORDS, dtype=torch.float64)


def model() -> AttentionModule:
    """A float64 `self` module holding the notebook's weights (x @ W is nn.Linear with weight W.T)."""
    module = blank("self", d_in=3, d_out=3).double()
    return load_weights(module, *(torch.from_numpy(w.T).double() for w in weights()))


def qkv() -> tuple[Tensor, Tensor, Tensor]:
    return single_head(model(), words())


def attention() -> tuple[Tensor, Tensor]:
    context, attention_weights = attend(*qkv(), need_weights=True)
    return context, attention_weights


WEIGHTS = [
    [2.36089863e-01, 7.38987555e-03, 7.49130386e-01, 7.38987555e-03],
    [4.54826323e-01, 4.51736775e-02, 4.54826323e-01, 4.51736775e-02],
    [2.39275049e-01, 7.43870015e-04, 7.59237211e-01, 7.43870015e-04],
    [8.99501754e-02, 2.81554063e-03, 9.05653685e-01, 1.58059922e-03],
]
ATTENTION = [
    [0.98522025, 1.74174051, 0.75652026],
    [0.90965265, 1.40965265, 0.5],
    [0.99851226, 1.75849334, 0.75998108],
    [0.99560386, 1.90407309, 0.90846923],
]

EXAMPLES = [
    Example("002 W_Q = randint(3) (regenerated)", NOTEBOOK, W_Q, lambda: weights()[0], decimals=None),
    Example("002 W_K = randint(3) (regenerated)", NOTEBOOK, W_K, lambda: weights()[1], decimals=None),
    Example("002 W_V = randint(3) (regenerated)", NOTEBOOK, W_V, lambda: weights()[2], decimals=None),
    Example("002 Q = words @ W_Q", NOTEBOOK, [[2, 0, 2], [2, 0, 0], [4, 0, 2], [2, 1, 2]],
            lambda: qkv()[0], decimals=None),
    Example("002 K = words @ W_K", NOTEBOOK, [[2, 2, 2], [0, 2, 1], [2, 4, 3], [0, 1, 1]],
            lambda: qkv()[1], decimals=None),
    Example("002 V = words @ W_V", NOTEBOOK, [[1, 1, 0], [0, 1, 1], [1, 2, 1], [0, 0, 0]],
            lambda: qkv()[2], decimals=None),
    Example("002 word 1: scores", NOTEBOOK, [8, 2, 10, 2], lambda: qkv()[0][0] @ qkv()[1].T, decimals=None),
    Example("002 word 1: weights", NOTEBOOK, [0.23608986, 0.00738988, 0.74913039, 0.00738988],
            lambda: attention()[1][0], decimals=8),
    Example("002 word 1: attention", NOTEBOOK, ATTENTION[0], lambda: attention()[0][0], decimals=8),
    Example("002 scores Q @ Kᵀ", NOTEBOOK, [[8, 2, 10, 2], [4, 0, 4, 0], [12, 2, 14, 2], [10, 4, 14, 3]],
            lambda: qkv()[0] @ qkv()[1].T, decimals=None),
    Example("002 weights", NOTEBOOK, WEIGHTS, lambda: attention()[1], decimals=8, scientific=True),
    Example("002 attention = weights @ V", NOTEBOOK, ATTENTION, lambda: attention()[0], decimals=8),
    Example("002 attention (self module, fused path)", NOTEBOOK, ATTENTION,
            lambda: model()(words()).context, decimals=8),
]
