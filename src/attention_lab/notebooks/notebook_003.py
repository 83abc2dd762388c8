"""003 - "Build an LLM from scratch", ch. 3.

"Your journey starts with one step", six 3-d embeddings: attention without trainable weights
(`simple`), then with torch.rand weights (seed 42, SelfAttention_v1) and nn.Linear weights
(seed 42, SelfAttention_v2).
"""

from __future__ import annotations

from functools import cache

import torch
from torch import Tensor

from attention_lab.attention import AttentionModule, build_attention
from attention_lab.notebooks.example import Example
from attention_lab.notebooks.weights import blank, load_weights, seeded, shape, single_head

NOTEBOOK = "003"
TITLE = "Build an LLM from scratch, ch. 3 (Your journey starts with one step)"

INPUTS = [
    [0.43, 0.15, 0.89],  # Your     (x^1)
    [0.55, 0.87, 0.66],  # journey  (x^2)
    [0.57, 0.85, 0.64],  # starts   (x^3)
    [0.22, 0.58, 0.33],  # with     (x^4)
    [0.77, 0.25, 0.10],  # one      (x^5)
    [0.05, 0.80, 0.55],  # step     (x^6)
]


def inputs() -> Tensor:
    return torch.tensor(INPUTS)


def simple(normalize: str = "softmax") -> AttentionModule:
    return build_attention("simple", d_in=3, d_out=3, normalize=normalize)


def simple_scores() -> Tensor:
    q, k, _ = single_head(simple(), inputs())
    return q @ k.T  # `simple` attends with scale=1: these are its scores


def simple_output(normalize: str = "softmax") -> tuple[Tensor, Tensor]:
    context, weights = simple(normalize)(inputs(), need_weights=True)
    return context, weights[0]


@cache
def rand_weights() -> tuple[Tensor, Tensor, Tensor]:
    """§3.4.1 and SelfAttention_v1: torch.manual_seed(42); W_query, W_key, W_value = torch.rand(d_in, d_out)."""
    with seeded(42):
        return torch.rand(3, 2), torch.rand(3, 2), torch.rand(3, 2)


def rand_model() -> AttentionModule:
    """A `self` module holding the torch.rand weights (x @ W is nn.Linear with weight W.T)."""
    return load_weights(blank("self", d_in=3, d_out=2), *(w.T for w in rand_weights()))


def rand_qkv() -> tuple[Tensor, Tensor, Tensor]:
    return single_head(rand_model(), inputs())


def rand_output() -> tuple[Tensor, Tensor]:
    context, weights = rand_model()(inputs(), need_weights=True)
    return context, weights[0]


def self_v2() -> Tensor:
    with seeded(42):
        module = build_attention("self", d_in=3, d_out=2)
    return module(inputs()).context


SCORES = [
    [0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310],
    [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],
    [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605],
    [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],
    [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935],
    [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450],
]
WEIGHTS = [
    [0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452],
    [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
    [0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565],
    [0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720],
    [0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295],
    [0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896],
]
CONTEXT = [
    [0.4421, 0.5931, 0.5790],
    [0.4419, 0.6515, 0.5683],
    [0.4431, 0.6496, 0.5671],
    [0.4304, 0.6298, 0.5510],
    [0.4671, 0.5910, 0.5266],
    [0.4177, 0.6503, 0.5645],
]
SELF_V1 = [
    [1.3751, 0.8610],
    [1.4201, 0.8892],
    [1.4198, 0.8890],
    [1.3533, 0.8476],
    [1.3746, 0.8606],
    [1.3620, 0.8532],
]
SELF_V2 = [
    [0.3755, 0.2777],
    [0.3761, 0.2831],
    [0.3761, 0.2833],
    [0.3768, 0.2763],
    [0.3754, 0.2836],
    [0.3772, 0.2746],
]

EXAMPLES = [
    Example("003 simple: attention_scores_2", NOTEBOOK, SCORES[1], lambda: simple_scores()[1]),
    Example("003 simple: naive weights (scores / sum), row 2", NOTEBOOK,
            [0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656], lambda: simple_output("sum")[1][1]),
    Example("003 simple: attention_weights_2", NOTEBOOK, WEIGHTS[1], lambda: simple_output()[1][1]),
    Example("003 simple: context_vec_2", NOTEBOOK, CONTEXT[1], lambda: simple_output()[0][1]),
    Example("003 simple: context_vec_1", NOTEBOOK, CONTEXT[0], lambda: simple_output()[0][0]),
    Example("003 simple: attn_scores", NOTEBOOK, SCORES, simple_scores),
    Example("003 simple: attn_weights", NOTEBOOK, WEIGHTS, lambda: simple_output()[1]),
    Example("003 simple: context vectors", NOTEBOOK, CONTEXT, lambda: simple_output()[0]),
    Example("003 trainable: query_2", NOTEBOOK, [1.0760, 1.7344], lambda: rand_qkv()[0][1]),
    Example("003 trainable: keys.shape, values.shape", NOTEBOOK, [[6, 2], [6, 2]],
            lambda: [shape(rand_qkv()[1]), shape(rand_qkv()[2])], decimals=None),
    Example("003 trainable: attn_scores_22", NOTEBOOK, 3.3338, lambda: rand_qkv()[0][1] @ rand_qkv()[1][1]),
    Example("003 trainable: attn_scores_2", NOTEBOOK, [2.7084, 3.3338, 3.3013, 1.7563, 1.7869, 2.1966],
            lambda: rand_qkv()[0][1] @ rand_qkv()[1].T),
    Example("003 trainable: attn_weights_2", NOTEBOOK, [0.1723, 0.2681, 0.2620, 0.0879, 0.0898, 0.1200],
            lambda: rand_output()[1][1]),
    Example("003 trainable: context_vec_2", NOTEBOOK, [1.4201, 0.8892], lambda: rand_output()[0][1]),
    Example("003 SelfAttention_v1 (torch.rand weights)", NOTEBOOK, SELF_V1, lambda: rand_model()(inputs()).context),
    Example("003 SelfAttention_v2 (nn.Linear, seed 42)", NOTEBOOK, SELF_V2, self_v2),
]
