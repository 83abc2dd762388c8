"""The mixers that replace softmax attention: linear attention, sigmoid attention and a gated long convolution.

Each is held to what the softmax variants are held to (test_attention_paths.py, test_gradcheck.py): the fast
path (need_weights=False), the weights path and a float64 reference written here from the papers' formulas
agree; a later token never changes an earlier output under causal=True; gradcheck; unbatched inputs; masks.
The references use only the module's parameters, never its code paths.
"""

from __future__ import annotations

import copy
import itertools
import math

import pytest
import torch
from test_attention_reference import assert_close, band, reference_alibi, reference_rope, tril
from torch.autograd import gradcheck
from torch.func import functional_call

from attention_lab.attention import AttentionArgumentError, build_attention

MIXERS = ("linear", "sigmoid", "conv")


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def allowed(batch: int, t: int, causal: bool, window: int | None, padding: torch.Tensor | None) -> torch.Tensor:
    """(B, 1, T, T): True where query i may read key j."""
    keep = torch.ones(batch, 1, t, t, dtype=torch.bool)
    if causal:
        keep = keep & tril(t, t)
    if window is not None:
        keep = keep & band(t, t, window, causal)
    if padding is not None:
        keep = keep & ~padding[:, None, None, :]
    return keep


def split(x: torch.Tensor, heads: int) -> torch.Tensor:
    b, t, d = x.shape  # (B, T, H * d) -> (B, H, T, d)
    return x.reshape(b, t, heads, d // heads).permute(0, 2, 1, 3)


def merged(module, context: torch.Tensor) -> torch.Tensor:
    b, h, t, d = context.shape  # (B, H, T, d) -> out_proj of the heads side by side
    return module.out_proj(context.permute(0, 2, 1, 3).reshape(b, t, h * d))


# ---------------------------------------------------------------------------------------------
# float64 references, from the papers' formulas
# ---------------------------------------------------------------------------------------------


def reference_linear(m, x, keep):
    """Katharopoulos et al. eq. 4-5: V'_i = Σ_j φ(Q_i)ᵀφ(K_j) V_j / Σ_j φ(Q_i)ᵀφ(K_j), φ = elu + 1."""
    heads, kv_heads = m.num_heads, m.kv_heads
    q, k, v = split(m.W_query(x), heads), split(m.W_key(x), kv_heads), split(m.W_value(x), kv_heads)
    k, v = k.repeat_interleave(heads // kv_heads, 1), v.repeat_interleave(heads // kv_heads, 1)
    phi = lambda z: torch.where(z > 0, z + 1, torch.exp(z))  # noqa: E731 - elu(z) + 1, written out
    similarity = torch.einsum("bhqd,bhkd->bhqk", phi(q), phi(k)) * keep
    total = similarity.sum(-1, keepdim=True)
    weights = torch.where(total > 0, similarity / torch.where(total > 0, total, 1), 0)
    return merged(m, weights @ v), weights


def reference_sigmoid(m, x, keep, position, causal, padded_keys, bias=None):
    """Ramapuram et al.: sigmoid(QKᵀ/√d + b), b = -log n, no normalisation; hidden keys weigh 0."""
    heads, kv_heads = m.num_heads, m.kv_heads
    q, k, v = split(m.W_query(x), heads), split(m.W_key(x), kv_heads), split(m.W_value(x), kv_heads)
    if position == "rope":
        q, k = reference_rope(q), reference_rope(k)
    k, v = k.repeat_interleave(heads // kv_heads, 1), v.repeat_interleave(heads // kv_heads, 1)
    b, t = x.shape[:2]
    # b = -log n, n the sequence's keys (padding not counted)
    n = torch.full((b,), float(t), dtype=torch.float64) if padded_keys is None else (~padded_keys).sum(-1).double()
    scores = torch.einsum("bhqd,bhkd->bhqk", q, k) / math.sqrt(q.shape[-1])
    scores = scores + (-n.clamp_min(1).log()[:, None, None, None] if bias is None else bias)
    if position == "alibi":
        scores = scores + reference_alibi(heads, t, t, causal)
    weights = torch.sigmoid(scores) * keep
    return merged(m, weights @ v), weights


def reference_filter(m, lag: int) -> torch.Tensor:
    """(H,) h(τ) = Σ_n c_n exp(-softplus(decay_n) |τ|) cos(θ_n τ + φ_n), written out for one lag."""
    f = m.long_filter
    rate = torch.log1p(torch.exp(f.decay))
    return (f.coefficient * torch.exp(-rate * abs(lag)) * torch.cos(f.frequency * lag + f.phase)).sum(-1)


def reference_conv(m, x, padding, causal):
    """gate_i ⊙ Σ_j h(i - j) u_j, u the short depthwise convolution of the values; hidden positions are zero."""
    b, t, _ = x.shape
    heads = m.num_heads
    real = torch.ones(b, t, 1, dtype=x.dtype) if padding is None else (~padding)[..., None].to(x.dtype)
    values = m.W_value(x) * real  # (B, T, C)
    taps = m.short_conv.weight[:, 0, :]  # (C, K)
    size = taps.shape[1]
    first = -(size - 1) if causal else -((size - 1) // 2)  # the offset of the first tap
    short = torch.zeros_like(values)
    for i in range(t):
        short[:, i] = m.short_conv.bias
        for tap in range(size):
            j = i + first + tap
            if 0 <= j < t:
                short[:, i] += taps[:, tap] * values[:, j]
    short = short * real
    toeplitz = torch.zeros(heads, t, t, dtype=x.dtype)
    for i, j in itertools.product(range(t), range(t)):
        if not causal or j <= i:
            toeplitz[:, i, j] = reference_filter(m, i - j)
    weights = toeplitz.expand(b, heads, t, t) * real.transpose(1, 2)[:, None]  # hidden keys: zero columns
    context = split(m.W_gate(x), heads) * (weights @ split(short, heads))
    return merged(m, context), weights


# ---------------------------------------------------------------------------------------------
# the paths against the references
# ---------------------------------------------------------------------------------------------

CASES = [  # (variant, build options, T): heads, grouped kv heads, rope, alibi, windows, chunks of the causal sums
    ("linear", dict(num_heads=2), 5),
    ("linear", dict(num_heads=4, kv_heads=2), 7),
    ("linear", dict(num_heads=1, kv_heads=1), 150),  # longer than a chunk of the prefix sums (64)
    ("sigmoid", dict(num_heads=2), 6),
    ("sigmoid", dict(num_heads=4, kv_heads=1, position="alibi", window=3), 7),
    ("sigmoid", dict(num_heads=2, position="rope", window=2, score_bias=0.5), 5),
    ("conv", dict(num_heads=2), 6),
    ("conv", dict(num_heads=8), 9),
    ("conv", dict(num_heads=1), 70),
]


def reference(variant, m, x, keep, padding, options, causal):
    if variant == "linear":
        return reference_linear(m, x, keep)
    if variant == "sigmoid":
        return reference_sigmoid(m, x, keep, options.get("position"), causal, padding, options.get("score_bias"))
    return reference_conv(m, x, padding, causal)


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize(("variant", "options", "t"), CASES, ids=[f"{v}-{i}" for i, (v, _, _) in enumerate(CASES)])
def test_fast_path_weights_path_and_float64_reference_agree(variant, options, t, causal, padded):
    torch.manual_seed(t)
    module = build_attention(variant, d_in=8, d_out=8, causal=causal, qkv_bias=True, **options)
    module64 = copy.deepcopy(module).double()
    x = torch.randn(3, t, 8)
    padding = (torch.arange(t)[None, :] >= torch.tensor([[t], [t - 2], [1]])) if padded else None
    fast, none = module(x, key_padding_mask=padding)
    slow, weights = module(x, key_padding_mask=padding, need_weights=True)
    keep = allowed(3, t, causal, options.get("window"), padding).double()
    with torch.no_grad():
        expected, expected_weights = reference(variant, module64, x.double(), keep, padding, options, causal)
    assert none is None and weights.shape == (3, module.num_heads, t, t)
    assert_close(weights, expected_weights)
    assert_close(slow, expected)
    assert_close(fast, expected, atol=2e-5)  # the FFT and the chunked sums round differently from a matmul
    assert (weights * (1 - keep) == 0).all()  # nothing read where the mask hides it
    if variant == "linear":  # rows of the implied matrix are normalised
        rows = weights.sum(-1)
        assert_close(rows[keep.any(-1).expand_as(rows)], torch.ones_like(rows[keep.any(-1).expand_as(rows)]))


@pytest.mark.parametrize("variant", MIXERS)
@pytest.mark.parametrize("need_weights", [False, True], ids=["fast", "weights"])
def test_a_later_token_never_changes_an_earlier_output(variant, need_weights):
    torch.manual_seed(0)
    module = build_attention(variant, d_in=6, d_out=6, num_heads=2, causal=True)
    x = torch.randn(2, 80, 6)
    for changed in (0, 40, 79):
        y = x.clone()
        y[:, changed] += torch.randn(2, 6) * 10
        before = module(x, need_weights=need_weights).context
        after = module(y, need_weights=need_weights).context
        # equal up to rounding: the FFT and the chunked sums mix every position into their sums of zeros
        assert_close(before[:, :changed], after[:, :changed])
        assert not torch.allclose(before[:, changed], after[:, changed])


@pytest.mark.parametrize("variant", MIXERS)
def test_unbatched_in_unbatched_out(variant):
    torch.manual_seed(0)
    module = build_attention(variant, d_in=4, d_out=4, num_heads=2, causal=True)
    x = torch.randn(3, 9, 4)
    padding = torch.arange(9)[None, :] >= torch.tensor([[9], [5], [2]])
    batched, batched_weights = module(x, key_padding_mask=padding, need_weights=True)
    for i, need_weights in itertools.product(range(3), (False, True)):
        context, weights = module(x[i], key_padding_mask=padding[i], need_weights=need_weights)
        assert context.shape == (9, 4)
        assert_close(context, batched[i])
        if need_weights:
            assert_close(weights, batched_weights[i])
        else:
            assert weights is None


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("variant", MIXERS)
def test_padding_does_not_change_real_tokens(variant, causal):
    torch.manual_seed(1)
    module = build_attention(variant, d_in=4, d_out=4, num_heads=2, causal=causal)
    x = torch.randn(1, 6, 4)
    padded = torch.cat([x, 100 * torch.randn(1, 3, 4)], dim=1)
    padding = torch.arange(9)[None, :] >= 6
    for need_weights in (False, True):
        alone = module(x, need_weights=need_weights).context
        assert_close(module(padded, key_padding_mask=padding, need_weights=need_weights).context[:, :6], alone)


@pytest.mark.parametrize("variant", MIXERS)
def test_a_query_with_nothing_to_read_is_finite(variant):
    torch.manual_seed(0)
    module = build_attention(variant, d_in=4, d_out=4, num_heads=2, causal=True)
    x = torch.randn(1, 5, 4, requires_grad=True)
    padding = torch.tensor([[True, True, False, False, False]])  # queries 0 and 1 see only padding
    for need_weights in (False, True):
        context, weights = module(x, key_padding_mask=padding, need_weights=need_weights)
        assert torch.isfinite(context).all()
        if variant != "conv":  # the gate of conv multiplies a zero sum: context is out_proj's bias there too
            assert_close(context[0, :2], module.out_proj.bias.expand(2, -1))
        x.grad = None
        context.sum().backward()
        assert torch.isfinite(x.grad).all()


def test_the_convolution_map_is_the_same_for_every_input():
    torch.manual_seed(0)
    module = build_attention("conv", d_in=4, d_out=4, num_heads=2, causal=True)
    first = module(torch.randn(2, 7, 4), need_weights=True).weights
    second = module(torch.randn(2, 7, 4), need_weights=True).weights
    assert torch.equal(first, second)
    # Toeplitz: constant along each diagonal, h(i - j)
    shifted = first[0, :, 1:, 1:]  # W[i+1, j+1] = W[i, j]
    assert torch.equal(shifted, first[0, :, :-1, :-1])


# ---------------------------------------------------------------------------------------------
# gradients
# ---------------------------------------------------------------------------------------------

GRAD_CASES = [(v, c, p, w) for v in MIXERS for c in (False, True) for p in (False, True) for w in (False, True)]


@pytest.mark.parametrize(("variant", "causal", "padded", "need_weights"), GRAD_CASES,
                         ids=[f"{v}-{'causal' if c else 'full'}-{'padded' if p else 'unpadded'}-{'weights' if w else 'fast'}"
                              for v, c, p, w in GRAD_CASES])
def test_gradcheck(variant, causal, padded, need_weights):
    torch.manual_seed(0)
    options = dict(kv_heads=1, position="alibi", window=2) if variant == "sigmoid" else {}
    if variant == "linear":
        options = dict(kv_heads=1)
    module = build_attention(variant, d_in=4, d_out=4, num_heads=2, causal=causal, qkv_bias=True, **options).double()
    names = [name for name, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for p in module.parameters()]
    x = torch.randn(2, 4, 4, dtype=torch.float64, requires_grad=True)
    padding = torch.tensor([[False, False, False, True], [True, False, False, False]]) if padded else None

    def run(x, *params):
        context, weights = functional_call(module, dict(zip(names, params, strict=True)), (x,),
                                           dict(key_padding_mask=padding, need_weights=need_weights))
        return (context, weights) if need_weights else context

    assert gradcheck(run, (x, *params), eps=1e-6, atol=1e-5, rtol=1e-4)


# ---------------------------------------------------------------------------------------------
# what does not apply, in one line naming the argument
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("variant", "option"), [
    ("linear", dict(window=2)),
    ("linear", dict(dropout=0.1)),
    ("linear", dict(position="rope")),
    ("linear", dict(position="alibi")),
    ("conv", dict(window=3)),
    ("conv", dict(dropout=0.1)),
    ("conv", dict(position="rope")),
    ("conv", dict(position="alibi")),
    ("conv", dict(kv_heads=1)),
    ("conv", dict(d_v=2)),
    ("sigmoid", dict(score_bias="minus log n")),
    ("sigmoid", dict(score_bias=float("nan"))),
    ("multihead", dict(score_bias=-1.0)),
    ("linear", dict(d_out=6, num_heads=4)),
    ("sigmoid", dict(d_out=6, num_heads=4)),
    ("conv", dict(d_out=6, num_heads=4)),
    ("sigmoid", dict(d_v=2)),
], ids=lambda v: v if isinstance(v, str) else "-".join(f"{k}={x}" for k, x in v.items()))
def test_options_that_do_not_apply_are_rejected(variant, option):
    with pytest.raises(AttentionArgumentError) as err:
        build_attention(variant, **{"d_in": 4, "d_out": 4, "num_heads": 2, **option})
    rejected = "num_heads" if "d_out" in option else next(iter(option))
    assert err.value.argument == rejected and "\n" not in str(err.value)
    assert variant in str(err.value) or (variant, rejected) == ("sigmoid", "score_bias")  # the message names the variant


def test_sigmoid_attention_is_not_normalised_and_starts_near_one_per_row():
    torch.manual_seed(0)
    module = build_attention("sigmoid", d_in=8, d_out=8, num_heads=2)
    with torch.no_grad():  # zero queries: every score is b = -log T, every weight 1 / (1 + T)
        module.W_query.weight.zero_()
    weights = module(torch.randn(1, 9, 8), need_weights=True).weights
    assert_close(weights, torch.full_like(weights, 1 / (1 + 9)))


@pytest.mark.parametrize(("overrides", "setting"), [
    (["model=linear", "model.dropout=0.1"], "model.dropout=0.1"),
    (["model=conv", "model.dropout=0.2"], "model.dropout=0.2"),
    (["model=conv", "kv_heads=2"], "kv_heads=2"),
    (["model=linear", "window=3"], "window=3"),
])
def test_the_config_refuses_what_a_mixer_does_not_take_in_one_line(overrides, setting):
    from attention_lab.checks import validate
    from attention_lab.errors import ConfigError
    from conftest import compose_config

    with pytest.raises(ConfigError) as err:
        validate(compose_config(overrides))
    assert setting in str(err.value) and "\n" not in str(err.value)
    validate(compose_config([*overrides[:1], "model.dropout=0.0"]))  # the mixer itself is fine
