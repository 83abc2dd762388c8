"""The worked examples of the five reference notebooks, recomputed with the attention library.

Each :class:`Example` holds a number the notebook printed (copied here as a literal: the project
never reads the notebooks at run time) and a function that computes the same quantity with
:func:`~attention_lab.attention.build_attention` / :func:`~attention_lab.attention.attend`
under the notebook's seeds. ``scripts/reproduce.py`` prints them side by side and
``tests/test_golden.py`` checks every one.

The notebooks:

* 000 - "Self-attention from scratch" (S. Raschka's blog, as a notebook): "Life is short, eat
  dessert first", d_q = d_k = 24, d_v = 28, torch.rand weights under seed 123.
* 001 - "Attention in Transformers" (StatQuest style): 2-d encodings of three tokens, seed 42;
  self, masked self, encoder-decoder and multi-head attention.
* 002 - "Attention from scratch" in NumPy: integer weights from ``np.random.randint`` (seed 42).
* 003 - "Build an LLM from scratch" ch. 3: "Your journey starts with one step"; attention
  without weights, then with torch.rand weights (seed 42) and nn.Linear weights (seed 42).
* 004 - the 000 computation again, then three heads of torch.rand weights (only shapes printed).

Tolerances follow the printed precision: one unit in the last printed decimal (half a unit of
rounding plus as much again for float32 summation order); numbers printed in scientific notation
get the same relative to their size, and integers must match exactly.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from attention_lab.attention import AttentionModule, attend, build_attention, causal_mask

NOTEBOOKS: dict[str, str] = {
    "000": "Self-attention from scratch (Life is short, eat dessert first)",
    "001": "Attention in Transformers: self, masked, encoder-decoder, multi-head",
    "002": "Attention from scratch in NumPy",
    "003": "Build an LLM from scratch, ch. 3 (Your journey starts with one step)",
    "004": "Scaled dot-product attention, single and multi-head (Life is short, eat dessert first)",
}


@dataclass(frozen=True)
class Example:
    """One printed result of a notebook and how the library computes it.

    ``expected`` is a number or nested list as the notebook printed it; ``compute()`` returns a
    tensor, array or number of the same shape. ``decimals`` is how many decimals the notebook
    printed (None: integers or booleans, compared exactly); ``scientific`` means they were
    printed as a mantissa in scientific notation (so the tolerance is relative).
    """

    name: str
    notebook: str
    expected: Any
    compute: Callable[[], Any]
    decimals: int | None = 4
    scientific: bool = False

    @property
    def tolerance(self) -> tuple[float, float]:
        """(atol, rtol): one unit in the last printed decimal."""
        if self.decimals is None:
            return 0.0, 0.0
        unit = 10.0 ** -self.decimals
        return (0.0, unit) if self.scientific else (unit, 0.0)


@dataclass(frozen=True)
class Comparison:
    example: Example
    expected: np.ndarray
    ours: np.ndarray
    max_error: float  # largest |ours - expected| (inf on a shape mismatch)
    ok: bool


def as_array(value: Any) -> np.ndarray:
    """Tensor / ndarray / number / nested list -> float64 ndarray."""
    if isinstance(value, Tensor):
        value = value.detach().cpu().double().numpy()
    return np.asarray(value, dtype=np.float64)


def compare(example: Example) -> Comparison:
    """Run ``example.compute()`` and compare it with the notebook's number."""
    expected = as_array(example.expected)
    ours = as_array(example.compute())
    if ours.shape != expected.shape:
        return Comparison(example, expected, ours, float("inf"), False)
    atol, rtol = example.tolerance
    error = np.abs(ours - expected)
    max_error = float(error.max()) if error.size else 0.0
    ok = bool(np.all(error <= atol + rtol * np.abs(expected)))
    return Comparison(example, expected, ours, max_error, ok)


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """``torch.manual_seed(seed)`` inside, the caller's RNG state untouched outside."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def blank(variant: str, **options: Any) -> AttentionModule:
    """A module whose weights are about to be overwritten: built without drawing from the caller's RNG."""
    with seeded(0):
        return build_attention(variant, **options)


def load_weights(module: AttentionModule, w_query: Tensor, w_key: Tensor, w_value: Tensor) -> AttentionModule:
    """Copy (d_out, d_in) weight matrices into a single-head module's nn.Linear layers."""
    with torch.no_grad():
        for layer, weight in ((module.W_query, w_query), (module.W_key, w_key), (module.W_value, w_value)):
            layer.weight.copy_(weight)
    return module


def projections(module: AttentionModule, x: Tensor, source: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """The module's (H, T, d) queries, keys and values of an unbatched sequence."""
    source = x if source is None else source
    q, k, v = module.project(x.unsqueeze(0), source.unsqueeze(0))
    return q[0], k[0], v[0]


def single_head(module: AttentionModule, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(T, d) queries, keys and values of a one-head module."""
    q, k, v = projections(module, x)
    return q[0], k[0], v[0]


def shape(t: Tensor) -> list[int]:
    return list(t.shape)


# ---------------------------------------------------------------------------------------------
# 001: three tokens with 2-d encodings, torch.manual_seed(42) before each model
# ---------------------------------------------------------------------------------------------

ENCODINGS_001 = [[1.16, 0.23], [0.57, 1.36], [4.41, -2.16]]


def encodings_001() -> Tensor:
    return torch.tensor(ENCODINGS_001)


def model_001(variant: str = "self", **options: Any) -> AttentionModule:
    """As the notebook: torch.manual_seed(42), then the model (d_model = 2)."""
    with seeded(42):
        return build_attention(variant, d_in=2, d_out=2, **options)


def sims_001() -> Tensor:
    q, k, _ = single_head(model_001(), encodings_001())
    return q @ k.T


def scaled_sims_001() -> Tensor:
    q, k, _ = single_head(model_001(), encodings_001())
    return (q @ k.T) / q.shape[-1] ** 0.5  # the scale attend() applies by default


SELF_OUTPUT_001 = [[1.0100, 1.0641], [0.2040, 0.7057], [3.4989, 2.2427]]
WEIGHTS_001 = [[0.3573, 0.4011, 0.2416], [0.3410, 0.6047, 0.0542], [0.0722, 0.0320, 0.8959]]

EXAMPLES_001 = [
    Example("001 SelfAttention", "001", SELF_OUTPUT_001, lambda: model_001()(encodings_001()).context),
    Example("001 W_q weight transposed", "001", [[0.5406, -0.1657], [0.5869, 0.6496]],
            lambda: model_001().W_query.weight.T),
    Example("001 W_k weight transposed", "001", [[-0.1549, -0.3443], [0.1427, 0.4153]],
            lambda: model_001().W_key.weight.T),
    Example("001 W_v weight transposed", "001", [[0.6233, 0.6146], [-0.5188, 0.1323]],
            lambda: model_001().W_value.weight.T),
    Example("001 queries q", "001", [[0.7621, -0.0428], [1.1063, 0.7890], [1.1164, -2.1336]],
            lambda: single_head(model_001(), encodings_001())[0]),
    Example("001 keys k", "001", [[-0.1469, -0.3038], [0.1057, 0.3685], [-0.9914, -2.4152]],
            lambda: single_head(model_001(), encodings_001())[1]),
    Example("001 values v", "001", [[0.6038, 0.7434], [-0.3502, 0.5303], [3.8695, 2.4246]],
            lambda: single_head(model_001(), encodings_001())[2]),
    Example("001 sims q·kᵀ", "001",
            [[-0.0990, 0.0648, -0.6523], [-0.4022, 0.4078, -3.0024], [0.4842, -0.6683, 4.0461]], sims_001),
    Example("001 scaled sims", "001",
            [[-0.0700, 0.0458, -0.4612], [-0.2844, 0.2883, -2.1230], [0.3424, -0.4725, 2.8610]], scaled_sims_001),
    Example("001 attention percents", "001", WEIGHTS_001,
            lambda: model_001()(encodings_001(), need_weights=True).weights[0]),
    Example("001 attention percents · v", "001", SELF_OUTPUT_001,
            lambda: model_001()(encodings_001(), need_weights=True).context),
    # The notebook's mask is True where a token may NOT look (masked_fill); the library's is the opposite.
    Example("001 causal mask (True = masked)", "001",
            [[False, True, True], [False, False, True], [False, False, False]], lambda: ~causal_mask(3, 3),
            decimals=None),
    Example("001 MaskedSelfAttention", "001", [[0.6038, 0.7434], [-0.0062, 0.6072], [3.4989, 2.2427]],
            lambda: model_001(causal=True)(encodings_001()).context),
    # The notebook fills the masked scores with -1e9 (the library uses -inf); the kept ones, printed to 5 digits:
    Example("001 masked scaled sims (kept entries)", "001",
            [-6.9975e-02, -2.8442e-01, 2.8833e-01, 3.4241e-01, -4.7253e-01, 2.8610e00],
            lambda: scaled_sims_001()[causal_mask(3, 3)], scientific=True),
    Example("001 masked attention percents", "001", [[1.0, 0.0, 0.0], [0.3606, 0.6394, 0.0], [0.0722, 0.0320, 0.8959]],
            lambda: model_001(causal=True)(encodings_001(), need_weights=True).weights[0]),
    Example("001 Attention (encoder-decoder)", "001", SELF_OUTPUT_001,
            lambda: model_001("cross")(encodings_001(), source=encodings_001()).context),
    Example("001 MultiHeadAttention, 1 head", "001", SELF_OUTPUT_001,
            lambda: model_001("multihead_concat", num_heads=1)(encodings_001()).context),
    Example("001 MultiHeadAttention, 3 heads", "001",
            [[1.0100, 1.0641, -0.7081, -0.8268, 0.6226, 0.1312],
             [0.2040, 0.7057, -0.7417, -0.9193, 0.5522, 0.2499],
             [3.4989, 2.2427, -0.7190, -0.8447, 0.5669, 0.2324]],
            lambda: model_001("multihead_concat", num_heads=3)(encodings_001()).context),
]

# ---------------------------------------------------------------------------------------------
# 002: NumPy, np.random.seed(42); W_Q, W_K, W_V = np.random.randint(3, size=(3, 3)) each
# ---------------------------------------------------------------------------------------------

WORDS_002 = [[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1]]
# What the notebook printed: golden values for the regeneration below.
W_Q_002 = [[2, 0, 2], [2, 0, 0], [2, 1, 2]]
W_K_002 = [[2, 2, 2], [0, 2, 1], [0, 1, 1]]
W_V_002 = [[1, 1, 0], [0, 1, 1], [0, 0, 0]]


@cache
def weights_002() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Regenerate W_Q, W_K, W_V with NumPy's legacy generator (what np.random.seed seeds)."""
    rng = np.random.RandomState(42)
    return tuple(rng.randint(3, size=(3, 3)) for _ in range(3))


def words_002() -> Tensor:
    return torch.tensor(WORDS_002, dtype=torch.float64)


def model_002() -> AttentionModule:
    """A float64 `self` module holding the notebook's weights (x @ W is nn.Linear with weight W.T)."""
    module = blank("self", d_in=3, d_out=3).double()
    return load_weights(module, *(torch.from_numpy(w.T).double() for w in weights_002()))


def qkv_002() -> tuple[Tensor, Tensor, Tensor]:
    return single_head(model_002(), words_002())


def attend_002() -> tuple[Tensor, Tensor]:
    context, weights = attend(*qkv_002(), need_weights=True)
    return context, weights


WEIGHTS_002 = [
    [2.36089863e-01, 7.38987555e-03, 7.49130386e-01, 7.38987555e-03],
    [4.54826323e-01, 4.51736775e-02, 4.54826323e-01, 4.51736775e-02],
    [2.39275049e-01, 7.43870015e-04, 7.59237211e-01, 7.43870015e-04],
    [8.99501754e-02, 2.81554063e-03, 9.05653685e-01, 1.58059922e-03],
]
ATTENTION_002 = [
    [0.98522025, 1.74174051, 0.75652026],
    [0.90965265, 1.40965265, 0.5],
    [0.99851226, 1.75849334, 0.75998108],
    [0.99560386, 1.90407309, 0.90846923],
]

EXAMPLES_002 = [
    Example("002 W_Q = randint(3) (regenerated)", "002", W_Q_002, lambda: weights_002()[0], decimals=None),
    Example("002 W_K = randint(3) (regenerated)", "002", W_K_002, lambda: weights_002()[1], decimals=None),
    Example("002 W_V = randint(3) (regenerated)", "002", W_V_002, lambda: weights_002()[2], decimals=None),
    Example("002 Q = words @ W_Q", "002", [[2, 0, 2], [2, 0, 0], [4, 0, 2], [2, 1, 2]],
            lambda: qkv_002()[0], decimals=None),
    Example("002 K = words @ W_K", "002", [[2, 2, 2], [0, 2, 1], [2, 4, 3], [0, 1, 1]],
            lambda: qkv_002()[1], decimals=None),
    Example("002 V = words @ W_V", "002", [[1, 1, 0], [0, 1, 1], [1, 2, 1], [0, 0, 0]],
            lambda: qkv_002()[2], decimals=None),
    Example("002 word 1: scores", "002", [8, 2, 10, 2], lambda: qkv_002()[0][0] @ qkv_002()[1].T, decimals=None),
    Example("002 word 1: weights", "002", [0.23608986, 0.00738988, 0.74913039, 0.00738988],
            lambda: attend_002()[1][0], decimals=8),
    Example("002 word 1: attention", "002", ATTENTION_002[0], lambda: attend_002()[0][0], decimals=8),
    Example("002 scores Q @ Kᵀ", "002", [[8, 2, 10, 2], [4, 0, 4, 0], [12, 2, 14, 2], [10, 4, 14, 3]],
            lambda: qkv_002()[0] @ qkv_002()[1].T, decimals=None),
    Example("002 weights", "002", WEIGHTS_002, lambda: attend_002()[1], decimals=8, scientific=True),
    Example("002 attention = weights @ V", "002", ATTENTION_002, lambda: attend_002()[0], decimals=8),
    Example("002 attention (self module, fused path)", "002", ATTENTION_002,
            lambda: model_002()(words_002()).context, decimals=8),
]

# ---------------------------------------------------------------------------------------------
# 003: "Your journey starts with one step", six 3-d embeddings
# ---------------------------------------------------------------------------------------------

INPUTS_003 = [
    [0.43, 0.15, 0.89],  # Your     (x^1)
    [0.55, 0.87, 0.66],  # journey  (x^2)
    [0.57, 0.85, 0.64],  # starts   (x^3)
    [0.22, 0.58, 0.33],  # with     (x^4)
    [0.77, 0.25, 0.10],  # one      (x^5)
    [0.05, 0.80, 0.55],  # step     (x^6)
]


def inputs_003() -> Tensor:
    return torch.tensor(INPUTS_003)


def simple_003(normalize: str = "softmax") -> AttentionModule:
    return build_attention("simple", d_in=3, d_out=3, normalize=normalize)


def simple_scores_003() -> Tensor:
    q, k, _ = single_head(simple_003(), inputs_003())
    return q @ k.T  # `simple` attends with scale=1: these are its scores


def simple_003_output(normalize: str = "softmax") -> tuple[Tensor, Tensor]:
    context, weights = simple_003(normalize)(inputs_003(), need_weights=True)
    return context, weights[0]


@cache
def rand_weights_003() -> tuple[Tensor, Tensor, Tensor]:
    """§3.4.1 and SelfAttention_v1: torch.manual_seed(42); W_query, W_key, W_value = torch.rand(d_in, d_out)."""
    with seeded(42):
        return torch.rand(3, 2), torch.rand(3, 2), torch.rand(3, 2)


def rand_model_003() -> AttentionModule:
    """A `self` module holding the torch.rand weights (x @ W is nn.Linear with weight W.T)."""
    return load_weights(blank("self", d_in=3, d_out=2), *(w.T for w in rand_weights_003()))


def rand_qkv_003() -> tuple[Tensor, Tensor, Tensor]:
    return single_head(rand_model_003(), inputs_003())


def rand_output_003() -> tuple[Tensor, Tensor]:
    context, weights = rand_model_003()(inputs_003(), need_weights=True)
    return context, weights[0]


def self_v2_003() -> Tensor:
    with seeded(42):
        module = build_attention("self", d_in=3, d_out=2)
    return module(inputs_003()).context


SCORES_003 = [
    [0.9995, 0.9544, 0.9422, 0.4753, 0.4576, 0.6310],
    [0.9544, 1.4950, 1.4754, 0.8434, 0.7070, 1.0865],
    [0.9422, 1.4754, 1.4570, 0.8296, 0.7154, 1.0605],
    [0.4753, 0.8434, 0.8296, 0.4937, 0.3474, 0.6565],
    [0.4576, 0.7070, 0.7154, 0.3474, 0.6654, 0.2935],
    [0.6310, 1.0865, 1.0605, 0.6565, 0.2935, 0.9450],
]
WEIGHTS_003 = [
    [0.2098, 0.2006, 0.1981, 0.1242, 0.1220, 0.1452],
    [0.1385, 0.2379, 0.2333, 0.1240, 0.1082, 0.1581],
    [0.1390, 0.2369, 0.2326, 0.1242, 0.1108, 0.1565],
    [0.1435, 0.2074, 0.2046, 0.1462, 0.1263, 0.1720],
    [0.1526, 0.1958, 0.1975, 0.1367, 0.1879, 0.1295],
    [0.1385, 0.2184, 0.2128, 0.1420, 0.0988, 0.1896],
]
CONTEXT_003 = [
    [0.4421, 0.5931, 0.5790],
    [0.4419, 0.6515, 0.5683],
    [0.4431, 0.6496, 0.5671],
    [0.4304, 0.6298, 0.5510],
    [0.4671, 0.5910, 0.5266],
    [0.4177, 0.6503, 0.5645],
]
SELF_V1_003 = [
    [1.3751, 0.8610],
    [1.4201, 0.8892],
    [1.4198, 0.8890],
    [1.3533, 0.8476],
    [1.3746, 0.8606],
    [1.3620, 0.8532],
]
SELF_V2_003 = [
    [0.3755, 0.2777],
    [0.3761, 0.2831],
    [0.3761, 0.2833],
    [0.3768, 0.2763],
    [0.3754, 0.2836],
    [0.3772, 0.2746],
]

EXAMPLES_003 = [
    Example("003 simple: attention_scores_2", "003", SCORES_003[1], lambda: simple_scores_003()[1]),
    Example("003 simple: naive weights (scores / sum), row 2", "003",
            [0.1455, 0.2278, 0.2249, 0.1285, 0.1077, 0.1656], lambda: simple_003_output("sum")[1][1]),
    Example("003 simple: attention_weights_2", "003", WEIGHTS_003[1], lambda: simple_003_output()[1][1]),
    Example("003 simple: context_vec_2", "003", CONTEXT_003[1], lambda: simple_003_output()[0][1]),
    Example("003 simple: context_vec_1", "003", CONTEXT_003[0], lambda: simple_003_output()[0][0]),
    Example("003 simple: attn_scores", "003", SCORES_003, simple_scores_003),
    Example("003 simple: attn_weights", "003", WEIGHTS_003, lambda: simple_003_output()[1]),
    Example("003 simple: context vectors", "003", CONTEXT_003, lambda: simple_003_output()[0]),
    Example("003 trainable: query_2", "003", [1.0760, 1.7344], lambda: rand_qkv_003()[0][1]),
    Example("003 trainable: keys.shape, values.shape", "003", [[6, 2], [6, 2]],
            lambda: [shape(rand_qkv_003()[1]), shape(rand_qkv_003()[2])], decimals=None),
    Example("003 trainable: attn_scores_22", "003", 3.3338, lambda: rand_qkv_003()[0][1] @ rand_qkv_003()[1][1]),
    Example("003 trainable: attn_scores_2", "003", [2.7084, 3.3338, 3.3013, 1.7563, 1.7869, 2.1966],
            lambda: rand_qkv_003()[0][1] @ rand_qkv_003()[1].T),
    Example("003 trainable: attn_weights_2", "003", [0.1723, 0.2681, 0.2620, 0.0879, 0.0898, 0.1200],
            lambda: rand_output_003()[1][1]),
    Example("003 trainable: context_vec_2", "003", [1.4201, 0.8892], lambda: rand_output_003()[0][1]),
    Example("003 SelfAttention_v1 (torch.rand weights)", "003", SELF_V1_003,
            lambda: rand_model_003()(inputs_003()).context),
    Example("003 SelfAttention_v2 (nn.Linear, seed 42)", "003", SELF_V2_003, self_v2_003),
]

# ---------------------------------------------------------------------------------------------
# 000 and 004: "Life is short, eat dessert first", nn.Embedding(6, 16) under seed 123, then
# seed 123 again and W_Q, W_K, W_V = torch.rand(24, 16), torch.rand(24, 16), torch.rand(28, 16)
# ---------------------------------------------------------------------------------------------

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
def rand_weights_000() -> tuple[tuple[Tensor, Tensor, Tensor], tuple[Tensor, Tensor, Tensor]]:
    """(W_Q, W_K, W_V) and, drawn next from the same stream, 004's three-head (W_Q, W_K, W_V)."""
    with seeded(123):
        single = torch.rand(D_QK, D_EMBED), torch.rand(D_QK, D_EMBED), torch.rand(D_V, D_EMBED)
        multi = (torch.rand(HEADS_004, D_QK, D_EMBED), torch.rand(HEADS_004, D_QK, D_EMBED),
                 torch.rand(HEADS_004, D_V, D_EMBED))
    return single, multi


def model_000() -> AttentionModule:
    """`self` with d_q = d_k = 24, d_v = 28: W.matmul(x) is nn.Linear with weight W as it is."""
    module = blank("self", d_in=D_EMBED, d_out=D_QK, d_v=D_V)
    return load_weights(module, *rand_weights_000()[0])


def qkv_000() -> tuple[Tensor, Tensor, Tensor]:
    return single_head(model_000(), embedded_sentence())


def omega_000() -> Tensor:
    q, k, _ = qkv_000()
    return q @ k.T  # omega[i, j] = query_i · key_j (unscaled)


def weights_000() -> Tensor:
    return attend(*qkv_000(), need_weights=True).weights


def model_004() -> AttentionModule:
    """`multihead_concat` with 3 heads holding 004's torch.rand(3, d, 16) weights, head by head."""
    module = blank("multihead_concat", d_in=D_EMBED, d_out=D_QK, d_v=D_V, num_heads=HEADS_004)
    w_q, w_k, w_v = rand_weights_000()[1]
    for h, head in enumerate(module.heads):
        load_weights(head, w_q[h], w_k[h], w_v[h])
    return module


def heads_vs_attend_004() -> float:
    """Largest difference between the module's head outputs and `attend` on each head's projections."""
    module, x = model_004(), embedded_sentence()
    context = module(x).context  # (6, 3 * 28): heads side by side
    q, k, v = projections(module, x)  # (3, 6, 24), (3, 6, 24), (3, 6, 28)
    per_head = [attend(q[h], k[h], v[h], need_weights=False).context for h in range(HEADS_004)]
    return float((context - torch.cat(per_head, dim=-1)).abs().max())


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
KEYS_000 = [
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
                lambda: [qkv_000()[0].shape[-1], qkv_000()[1].shape[-1], qkv_000()[2].shape[-1]], decimals=None),
        Example(f"{notebook} keys.shape, values.shape", notebook, [[6, 24], [6, 28]],
                lambda: [shape(qkv_000()[1]), shape(qkv_000()[2])], decimals=None),
        Example(f"{notebook} attention_weights_2 (attend)", notebook, ATTENTION_WEIGHTS_2, lambda: weights_000()[1]),
        Example(f"{notebook} context_vector_2", notebook, CONTEXT_VECTOR_2,
                lambda: model_000()(embedded_sentence()).context[1]),
    ]


EXAMPLES_000 = [
    *examples_life_is_short("000"),
    Example("000 keys (rows 1-4, as printed)", "000", KEYS_000, lambda: qkv_000()[1][:4]),
    Example("000 keys[4, 0] (where the print is cut off)", "000", 1.1230, lambda: qkv_000()[1][4, 0]),
    Example("000 omega_24", "000", 11.1466, lambda: omega_000()[1, 4]),
    Example("000 omega_2", "000", OMEGA_2, lambda: omega_000()[1]),
]

EXAMPLES_004 = [
    *examples_life_is_short("004"),
    Example("004 multi-head: multihead_query_2.shape", "004", [3, 24],
            lambda: shape(projections(model_004(), embedded_sentence())[0][:, 1]), decimals=None),
    Example("004 multi-head: multihead_keys.shape", "004", [3, 6, 24],
            lambda: shape(projections(model_004(), embedded_sentence())[1]), decimals=None),
    Example("004 multi-head: multihead_values.shape", "004", [3, 6, 28],
            lambda: shape(projections(model_004(), embedded_sentence())[2]), decimals=None),
    # Not printed by the notebook (it stops at the shapes): each head of the module is `attend` on its projections.
    Example("004 multi-head: heads = attend per head (max diff)", "004", 0.0, heads_vs_attend_004, decimals=5),
]

EXAMPLES: list[Example] = [*EXAMPLES_000, *EXAMPLES_001, *EXAMPLES_002, *EXAMPLES_003, *EXAMPLES_004]


def examples_for(notebook: str | None = None) -> list[Example]:
    """All examples, or those of one notebook ("000".."004")."""
    return [e for e in EXAMPLES if notebook is None or e.notebook == notebook]


def compare_all(notebook: str | None = None) -> list[Comparison]:
    with torch.no_grad():
        return [compare(example) for example in examples_for(notebook)]
