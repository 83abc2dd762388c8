"""000 - "Self-attention from scratch" (S. Raschka's blog, as a notebook).

"Life is short, eat dessert first": nn.Embedding(6, 16) under seed 123, then seed 123 again and
W_Q, W_K, W_V = torch.rand(24, 16), torch.rand(24, 16), torch.rand(28, 16), so d_q = d_k = 24 and
d_v = 28. Notebook 004 repeats this computation (see :func:`examples_life_is_short`).
"""

from __future__ import annotations

from functools import cache

import torch
from torch import Tensor, nn

from attention_lab.attention import AttentionModule, attend
from attention_lab.notebooks.example import Example
from attention_lab.notebooks.weights import blank, load_weights, seeded, shape, single_head

NOTEBOOK = "000"
TITLE = "Self-attention from scratch (Life is short, eat dessert first)"

SENTENCE = "Life is short, eat dessert first"
D_EMBED, D_QK, D_V, HEADS_004 = 16, 24, 28, 3


def token_ids() -> Tensor:
    words = SENTENCE.replace(",", "").split()
    vocab = {word: i for i, word in enumerate(sorted(words))}
    return torch.tensor([vocab[word] for word in words])


@cache
def embedded_sentence() -> Tensor:
    with seeded(123):
        embedding = nn.Embedding(6, D_EMBED)
    return embedding(token_ids()).detach()


@cache
def rand_weights() -> tuple[tuple[Tensor, Tensor, Tensor], tuple[Tensor, Tensor, Tensor]]:
    """(W_Q, W_K, W_V) and, drawn next from the same stream, 004's three-head (W_Q, W_K, W_V)."""
    with seeded(123):
        single = torch.rand(D_QK, D_EMBED), torch.rand(D_QK, D_EMBED), torch.rand(D_V, D_EMBED)
        multi = (torch.rand(HEADS_004, D_QK, D_EMBED), torch.rand(HEADS_004, D_QK, D_EMBED),
                 torch.rand(HEADS_004, D_V, D_EMBED))
    return single, multi


def model() -> AttentionModule:
    """`self` with d_q = d_k = 24, d_v = 28: W.matmul(x) is nn.Linear with weight W as it is."""
    module = blank("self", d_in=D_EMBED, d_out=D_QK, d_v=D_V)
    return load_weights(module, *rand_weights()[0])


def qkv() -> tuple[Tensor, Tensor, Tensor]:
    return single_head(model(), embedded_sentence())


def omega() -> Tensor:
    q, k, _ = qkv()
    return q @ k.T  # omega[i, j] = query_i · key_j (unscaled)


def attention_weights() -> Tensor:
    return attend(*qkv(), need_weights=True).weights


EMBEDDED_SENTENCE = [
    [0.3374, -0.1778, -0.3035, -0.5880, 0.3486, 0.6603, -0.2196, -0.3792,
     0.7671, -1.1925, 0.6984, -1.4097, 0.1794, 1.8951, 0.4954, 0.2692],
    [0.5146, 0.9938, -0.2587, -1.0826, -0.0444, 1.6236, -2.3229, 1.0878,
     0.6716, 0.6933, -0.9487, -0.0765, -0.1526, 0.1167, 0.4403, -1.4465],
    [0.2553, -0.5496, 1.0042, 0.8272, -0.3948, 0.4892, -0.2168, -1.7472,
     -1.6025, -1.0764, 0.9031, -0.7218, -0.5951, -0.7112, 0.6230, -1.3729],
    [-1.3250, 0.1784, -2.1338, 1.0524, -0.3885, -0.9343, -0.4991, -1.0867,
     0.8805, 1.5542, 0.6266, -0.1755, 0.0983, -0.0935, 0.2662, -0.5850],
    [-0.0770, -1.0205, -0.1690, 0.9178, 1.5810, 1.3010, 1.2753, -0.2010,
     0.4965, -1.5723, 0.9666, -1.1481, -1.1589, 0.3255, -0.6315, -2.8400],
    [0.8768, 1.6221, -1.4779, 1.1331, -1.2203, 1.3139, 1.0533, 0.1388,
     2.2473, -0.8036, -0.2808, 0.7697, -0.6596, -0.7979, 0.1838, 0.2293],
]
# 000 prints `keys`; the output is cut off after the first number of the fifth row.
KEYS = [
    [1.3274, 0.9452, 0.5531, 0.1000, -1.5909, 0.8779, 0.8645, 1.1643,
     2.2148, 1.3088, 0.8315, -1.5550, -0.2360, 2.0408, -0.3657, 1.7449,
     0.1180, 2.2120, -0.2037, -0.6591, -0.1771, -0.1563, 0.7547, 1.0151],
    [-0.0809, -1.2746, -2.3948, -0.3425, 1.5967, 0.5399, 0.9113, 0.0962,
     0.7300, -1.0553, 1.2533, -0.2113, 1.0208, -0.7470, 1.5171, 0.2773,
     -0.3173, 0.2698, 1.5237, -1.0970, 1.3849, 0.4400, -2.4926, 0.3594],
    [-2.1744, -2.7340, -1.0410, -1.8867, -4.0902, -0.3303, -3.1343, -2.4864,
     -1.1285, -3.5427, -4.7195, -6.1590, -0.9058, -3.2316, -1.3660, -3.5371,
     -2.7504, -2.3356, -1.2755, -3.0702, -2.3168, 0.4209, -2.5422, -3.8700],
    [-0.4005, 0.6766, -1.7351, 1.0082, -1.1248, -3.2161, 0.5959, -2.3485,
     -1.7592, -1.2618, -1.8644, -0.5954, -1.4934, -3.0239, 0.3801, -1.9108,
     -0.6866, -2.1498, -1.9909, -0.8837, -1.6336, -2.1131, -0.4434, -0.1749],
]
OMEGA_2 = [8.5808, -7.6597, 3.2558, 1.0395, 11.1466, -0.4800]
ATTENTION_WEIGHTS_2 = [0.2912, 0.0106, 0.0982, 0.0625, 0.4917, 0.0458]
CONTEXT_VECTOR_2 = [
    -1.5993, 0.0156, 1.2670, 0.0032, -0.6460, -1.1407, -0.4908, -1.4632,
    0.4747, 1.1926, 0.4506, -0.7110, 0.0602, 0.7125, -0.1628, -2.0184,
    0.3838, -2.1188, -0.8136, -1.5694, 0.7934, -0.2911, -1.3640, -0.2366,
    -0.9564, -0.5265, 0.0624, 1.7084,
]


def examples_life_is_short(notebook: str) -> list[Example]:
    """The single-head computation that 000 and 004 share."""
    return [
        Example(f"{notebook} token ids", notebook, [0, 4, 5, 2, 1, 3], token_ids, decimals=None),
        Example(f"{notebook} embedded sentence", notebook, EMBEDDED_SENTENCE, embedded_sentence),
        Example(f"{notebook} query_2, key_2, value_2 shapes", notebook, [24, 24, 28],
                lambda: [qkv()[0].shape[-1], qkv()[1].shape[-1], qkv()[2].shape[-1]], decimals=None),
        Example(f"{notebook} keys.shape, values.shape", notebook, [[6, 24], [6, 28]],
                lambda: [shape(qkv()[1]), shape(qkv()[2])], decimals=None),
        Example(f"{notebook} attention_weights_2 (attend)", notebook, ATTENTION_WEIGHTS_2,
                lambda: attention_weights()[1]),
        Example(f"{notebook} context_vector_2", notebook, CONTEXT_VECTOR_2,
                lambda: model()(embedded_sentence()).context[1]),
    ]


EXAMPLES = [
    *examples_life_is_short(NOTEBOOK),
    Example("000 keys (rows 1-4, as printed)", NOTEBOOK, KEYS, lambda: qkv()[1][:4]),
    Example("000 keys[4, 0] (where the print is cut off)", NOTEBOOK, 1.1230, lambda: qkv()[1][4, 0]),
    Example("000 omega_24", NOTEBOOK, 11.1466, lambda: omega()[1, 4]),
    Example("000 omega_2", NOTEBOOK, OMEGA_2, lambda: omega()[1]),
]
