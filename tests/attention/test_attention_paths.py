"""The two paths of every attention variant agree with each other and with a float64 reference.

* fast path: ``need_weights=False`` (PyTorch's fused ``scaled_dot_product_attention``)
* math path: ``need_weights=True`` (explicit softmax, returns the weights)
* reference: plain ``softmax(q·kᵀ·scale + bias)`` with ``-inf`` masking, in float64, with its own RoPE
  (complex multiplication), ALiBi (the paper's slopes), sliding window and grouped-query attention
  (``repeat_interleave`` of the kv heads): see test_attention_reference.py

Inputs are float32 with small dimensions (<= 32), where float32 accumulation stays well inside
atol=1e-5, rtol=1.3e-6.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from test_attention_reference import (
    assert_close,
    band,
    reference_alibi,
    reference_attention,
    reference_rope,
    tril,
)
from torch import Tensor

from attention_lab.attention import ATTENTION_REGISTRY, VARIANTS, AttentionModule, attend, build_attention

SETTINGS = settings(max_examples=50, deadline=None)
# The reference here is softmax attention; the mixers that replace it have theirs in test_mixers.py.
# mla is softmax attention too, but its keys and values come from a latent: its reference is test_variant_mla.py
SOFTMAX_VARIANTS = [v for v in VARIANTS if ATTENTION_REGISTRY[v].kind == "softmax" and v != "mla"]
seeds = st.integers(min_value=0, max_value=2**31 - 1)


def assert_finite_grads(*tensors: Tensor) -> None:
    for t in tensors:
        assert t.grad is not None
        assert torch.isfinite(t.grad).all(), "NaN/inf in a gradient"


# ---------------------------------------------------------------------------------------------
# attend
# ---------------------------------------------------------------------------------------------


@st.composite
def attend_cases(draw):
    lead = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))  # () = unbatched
    t_q, t_k = draw(st.integers(1, 8)), draw(st.integers(1, 8))
    d_k, d_v = draw(st.integers(1, 32)), draw(st.integers(1, 32))
    masking = draw(st.sampled_from(["none", "causal", "mask", "both"]))
    mask_shape = draw(st.sampled_from(["2d", "full"]))  # (T_q, T_k) broadcast, or (*lead, T_q, T_k)
    blank_row = draw(st.booleans())  # force a query that may attend to nothing
    scale = draw(st.one_of(st.none(), st.floats(0.1, 2.0)))
    window = draw(st.one_of(st.none(), st.integers(1, 9)))
    bias = draw(st.sampled_from([None, "2d", "full"]))  # an additive float bias, like ALiBi's
    groups = draw(st.integers(1, 3)) if lead else 1  # query heads per kv head (dim -3); 1 = no grouping
    return lead, t_q, t_k, d_k, d_v, masking, mask_shape, blank_row, scale, window, bias, groups, draw(seeds)


@SETTINGS
@given(attend_cases())
def test_attend_paths_match_reference(case):
    lead, t_q, t_k, d_k, d_v, masking, mask_shape, blank_row, scale, window, bias_shape, groups, seed = case
    q_lead = (*lead[:-1], lead[-1] * groups) if lead else lead
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(*q_lead, t_q, d_k, generator=g, requires_grad=True)
    k = torch.randn(*lead, t_k, d_k, generator=g, requires_grad=True)
    v = torch.randn(*lead, t_k, d_v, generator=g, requires_grad=True)
    causal = masking in ("causal", "both")
    mask = None
    if masking in ("mask", "both"):
        shape = (t_q, t_k) if mask_shape == "2d" else (*q_lead, t_q, t_k)
        mask = torch.rand(*shape, generator=g) < 0.7
        if blank_row:
            mask[..., 0, :] = False
    bias = None
    if bias_shape is not None:
        bias = torch.randn(*((t_q, t_k) if bias_shape == "2d" else (*q_lead, t_q, t_k)), generator=g)

    allowed = torch.ones(t_q, t_k, dtype=torch.bool)
    if causal:
        allowed = allowed & tril(t_q, t_k)
    if window is not None:
        allowed = allowed & band(t_q, t_k, window, causal)
    if mask is not None:
        allowed = allowed & mask
    k_ref, v_ref = (k.repeat_interleave(groups, dim=-3), v.repeat_interleave(groups, dim=-3)) if lead else (k, v)
    ref_context, ref_weights = reference_attention(q, k_ref, v_ref, allowed,
                                                   1 / math.sqrt(d_k) if scale is None else scale, bias)

    options = dict(causal=causal, mask=mask, window=window, bias=bias, scale=scale, enable_gqa=groups > 1)
    fast, none = attend(q, k, v, need_weights=False, **options)
    slow, weights = attend(q, k, v, need_weights=True, **options)
    assert none is None
    assert weights.shape == (*q_lead, t_q, t_k)
    assert_close(fast, ref_context)
    assert_close(slow, ref_context)
    assert_close(weights, ref_weights)

    blank = ~allowed.expand(*q_lead, t_q, t_k).any(dim=-1)  # queries that may attend to nothing
    assert (weights[blank] == 0).all()
    assert (fast[blank] == 0).all() and (slow[blank] == 0).all()

    for out in (fast.sum(), slow.sum() + weights.sum()):
        q.grad = k.grad = v.grad = None
        out.backward()
        assert_finite_grads(q, k, v)


def test_attend_fully_masked_rows_give_zeros_not_nan():
    q, k, v = (torch.randn(2, 3, 4, requires_grad=True) for _ in range(3))
    mask = torch.tensor([[False, False, False], [True, False, False], [True, True, True]])
    for need_weights in (False, True):
        context, weights = attend(q, k, v, mask=mask, need_weights=need_weights)
        assert (context[:, 0] == 0).all() and not context.isnan().any()
        if need_weights:
            assert (weights[:, 0] == 0).all() and not weights.isnan().any()
        q.grad = k.grad = v.grad = None
        context.sum().backward()
        assert_finite_grads(q, k, v)
        assert (q.grad[:, 0] == 0).all()


# ---------------------------------------------------------------------------------------------
# every registered variant
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModuleCase:
    variant: str
    batch: int
    t_q: int
    t_k: int
    d_in: int
    d_out: int
    num_heads: int
    d_v: int | None
    qkv_bias: bool
    causal: bool
    padding: bool
    seed: int
    kv_heads: int | None = None
    window: int | None = None
    position: str | None = None

    @property
    def options(self) -> dict:
        options = dict(d_in=self.d_in, d_out=self.d_out, num_heads=self.num_heads, causal=self.causal)
        if self.d_v is not None:
            options["d_v"] = self.d_v
        if self.qkv_bias:
            options["qkv_bias"] = True
        for name in ("kv_heads", "window", "position"):
            if getattr(self, name) is not None:
                options[name] = getattr(self, name)
        return options

    def build(self, **overrides) -> AttentionModule:
        torch.manual_seed(self.seed)
        return build_attention(self.variant, **{**self.options, **overrides})


@st.composite
def module_cases(draw, variants=SOFTMAX_VARIANTS):
    variant = draw(st.sampled_from(variants))
    cls = ATTENTION_REGISTRY[variant]
    d_in = draw(st.integers(1, 32))
    num_heads, kv_heads, d_v, qkv_bias = 1, None, None, False
    # rope and alibi where they make sense; "none" means no position inside attention, like None.
    inside = cls.projects and not cls.takes_source
    position = draw(st.sampled_from([None, "none", "rope", "alibi"] if inside else [None, "none"]))
    pairs = 2 if position == "rope" else 1  # rope rotates feature pairs: even head dims
    if variant == "simple":
        d_out = d_in
    elif variant in ("multihead", "gated"):  # heads split one width
        num_heads = draw(st.integers(1, 4))
        kv_heads = draw(st.sampled_from([None, *(k for k in range(1, num_heads + 1) if num_heads % k == 0)]))
        d_out = num_heads * pairs * draw(st.integers(1, 4 // pairs))
    else:
        d_out = pairs * draw(st.integers(1, 32 // pairs))
        d_v = draw(st.one_of(st.none(), st.integers(1, 32)))
        if variant == "multihead_concat":
            num_heads = draw(st.integers(1, 4))
    if variant != "simple":
        qkv_bias = draw(st.booleans())
    t_q = draw(st.integers(1, 7))
    t_k = draw(st.integers(1, 7)) if variant == "cross" else t_q
    causal = variant != "cross" and draw(st.booleans())
    window = draw(st.one_of(st.none(), st.integers(1, 8)))
    return ModuleCase(variant, draw(st.integers(1, 3)), t_q, t_k, d_in, d_out, num_heads, d_v, qkv_bias, causal,
                      draw(st.booleans()), draw(seeds), kv_heads, window, position)


def inputs(case: ModuleCase, dtype=torch.float32) -> tuple[Tensor, Tensor | None, Tensor | None]:
    g = torch.Generator().manual_seed(case.seed)
    x = torch.randn(case.batch, case.t_q, case.d_in, generator=g, dtype=dtype)
    source = torch.randn(case.batch, case.t_k, case.d_in, generator=g, dtype=dtype) if case.variant == "cross" else None
    padding = torch.rand(case.batch, case.t_k, generator=g) < 0.3 if case.padding else None
    return x, source, padding


def allowed_mask(case: ModuleCase, padding: Tensor | None) -> Tensor:
    """(B, 1, T_q, T_k): True where query i may attend to key j."""
    allowed = torch.ones(case.batch, 1, case.t_q, case.t_k, dtype=torch.bool)
    if case.causal:
        allowed = allowed & tril(case.t_q, case.t_k)
    if case.window is not None:
        allowed = allowed & band(case.t_q, case.t_k, case.window, case.causal)
    if padding is not None:
        allowed = allowed & ~padding[:, None, None, :]
    return allowed


@SETTINGS
@given(module_cases())
def test_module_paths_match_float64(case):
    module = case.build()
    module64 = copy.deepcopy(module).double()
    x, source, padding = inputs(case)
    x.requires_grad_(True)

    fast, none = module(x, source, key_padding_mask=padding)
    slow, weights = module(x, source, key_padding_mask=padding, need_weights=True)
    x64, source64 = x.detach().double(), None if source is None else source.double()
    exact, exact_weights = module64(x64, source64, key_padding_mask=padding, need_weights=True)
    assert none is None
    assert fast.shape == (case.batch, case.t_q, module.output_dim)
    assert weights.shape == (case.batch, case.num_heads, case.t_q, case.t_k)
    assert_close(fast, exact)
    assert_close(slow, exact)
    assert_close(weights, exact_weights)

    # The float64 module itself against the reference, on its own projections.
    q, k, v = module64.project(x64, x64 if source64 is None else source64)
    if case.position == "rope":
        q, k = reference_rope(q), reference_rope(k)
    groups = q.shape[1] // k.shape[1]  # grouped-query attention: query head h reads kv head h // groups
    assert k.shape[1] == (case.kv_heads or case.num_heads)
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    bias = reference_alibi(case.num_heads, case.t_q, case.t_k, case.causal) if case.position == "alibi" else None
    scale = 1.0 if case.variant == "simple" else 1 / math.sqrt(q.shape[-1])
    ref_context, ref_weights = reference_attention(q, k, v, allowed_mask(case, padding), scale, bias)
    assert_close(exact_weights, ref_weights)
    # gate_heads: the identity, or gated's sigmoid gate of the input on each head's output.
    assert_close(exact, module64.merge(module64.gate_heads(ref_context, x64)))

    # Queries with nothing to attend to: zero weights, and the merge of a zero context.
    blank = ~allowed_mask(case, padding).any(dim=-1)[:, 0]  # (B, T_q)
    empty = module64.merge(torch.zeros(1, q.shape[1], 1, v.shape[-1], dtype=torch.float64))[0, 0]
    assert (weights.transpose(1, 2)[blank] == 0).all()
    for out in (fast, slow):
        assert_close(out[blank], empty.expand_as(out[blank]))

    for loss in (fast.sum(), slow.sum() + weights.sum()):
        module.zero_grad()
        x.grad = None
        loss.backward()
        assert_finite_grads(x, *module.parameters())


@SETTINGS
@given(module_cases(), st.integers(1, 4))
def test_padding_does_not_change_real_tokens(case, extra):
    """A sequence padded with garbage (key_padding_mask) attends as if it were alone."""
    module = case.build()
    x, source, _ = inputs(case)
    x, source = x[:1], None if source is None else source[:1]
    g = torch.Generator().manual_seed(case.seed + 1)
    if case.variant == "cross":  # pad the source: the keys and values
        padded_x = x
        padded_source = torch.cat([source, 100 * torch.randn(1, extra, case.d_in, generator=g)], dim=1)
        padding = torch.arange(case.t_k + extra)[None, :] >= case.t_k
    else:  # pad the sequence itself (right padding, so causal queries never see it anyway)
        padded_x = torch.cat([x, 100 * torch.randn(1, extra, case.d_in, generator=g)], dim=1)
        padded_source = None
        padding = torch.arange(case.t_q + extra)[None, :] >= case.t_q
    for need_weights in (False, True):
        alone = module(x, source, need_weights=need_weights).context
        padded = module(padded_x, padded_source, key_padding_mask=padding, need_weights=need_weights).context
        assert_close(padded[:, : case.t_q], alone)


@SETTINGS
@given(module_cases(), st.integers(1, 4))
def test_padded_batch_matches_each_sequence_alone(case, extra):
    """Two sequences of different lengths in one padded batch: each as if alone."""
    module = case.build()
    g = torch.Generator().manual_seed(case.seed)
    short_t = case.t_k if case.variant == "cross" else case.t_q
    long_t = short_t + extra
    seqs = [torch.randn(1, t, case.d_in, generator=g) for t in (long_t, short_t)]
    batch = torch.cat([seqs[0], torch.cat([seqs[1], torch.randn(1, extra, case.d_in, generator=g)], dim=1)])
    padding = torch.stack([torch.zeros(long_t, dtype=torch.bool), torch.arange(long_t) >= short_t])
    queries = torch.randn(2, case.t_q, case.d_in, generator=g)
    for need_weights in (False, True):
        if case.variant == "cross":
            both = module(queries, batch, key_padding_mask=padding, need_weights=need_weights).context
            for i, seq in enumerate(seqs):
                assert_close(both[i], module(queries[i], seq[0], need_weights=need_weights).context)
        else:
            both = module(batch, key_padding_mask=padding, need_weights=need_weights).context
            for i, seq in enumerate(seqs):
                t = seq.shape[1]
                assert_close(both[i, :t], module(seq[0], need_weights=need_weights).context)


@SETTINGS
@given(module_cases())
def test_unbatched_in_unbatched_out(case):
    module = case.build()
    x, source, padding = inputs(case)
    batched, batched_weights = module(x, source, key_padding_mask=padding, need_weights=True)
    for need_weights in (False, True):
        context, weights = module(x[0], None if source is None else source[0],
                                  key_padding_mask=None if padding is None else padding[0], need_weights=need_weights)
        assert context.shape == (case.t_q, module.output_dim)
        assert_close(context, batched[0])
        if need_weights:
            assert weights.shape == (case.num_heads, case.t_q, case.t_k)
            assert_close(weights, batched_weights[0])
        else:
            assert weights is None


@settings(max_examples=20, deadline=None)
@given(module_cases(), st.sampled_from([0.1, 0.5, 0.9]))
def test_dropout_only_in_training(case, p):
    module = case.build(dropout=p)
    plain = case.build(dropout=0.0)  # same seed: the same weights
    x, source, padding = inputs(case)
    module.eval()
    for need_weights in (False, True):
        first = module(x, source, key_padding_mask=padding, need_weights=need_weights)
        second = module(x, source, key_padding_mask=padding, need_weights=need_weights)
        reference = plain(x, source, key_padding_mask=padding, need_weights=need_weights)
        assert torch.equal(first.context, second.context)
        assert_close(first.context, reference.context)
        if need_weights:
            assert torch.equal(first.weights, reference.weights)


def test_dropout_changes_outputs_in_training():
    torch.manual_seed(0)
    x = torch.randn(2, 8, 8)
    for variant in SOFTMAX_VARIANTS:
        kwargs = dict(d_in=8, d_out=8, num_heads=2 if variant.startswith("multihead") else 1, dropout=0.5)
        module = build_attention(variant, **kwargs)
        source = x if variant == "cross" else None
        module.eval()
        evaluated = module(x, source, need_weights=True)
        module.train()
        for need_weights in (False, True):
            trained = module(x, source, need_weights=need_weights)
            assert not torch.allclose(trained.context, evaluated.context), variant
        # The math path drops weights and rescales the rest by 1 / (1 - p).
        weights = module(x, source, need_weights=True).weights
        kept = weights != 0
        assert (~kept).any() and kept.any(), variant
        assert torch.allclose(weights[kept], 2 * evaluated.weights[kept]), variant
