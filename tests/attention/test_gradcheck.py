"""torch.autograd.gradcheck on small float64 cases: every variant and option, with and without masks, both paths."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.autograd import gradcheck
from torch.func import functional_call

from attention_lab.attention import ATTENTION_REGISTRY, VARIANTS, attend, build_attention

BATCH, T_Q, T_K, D_IN = 2, 3, 4, 4
# Row 1 pads the first keys: with a causal mask its first query then has nothing to attend to.
SELF_PADDING = torch.tensor([[False, False, True], [True, False, False]])
CROSS_PADDING = torch.tensor([[False, False, False, True], [True, True, False, False]])


def options(variant: str) -> dict:
    if variant == "simple":
        return dict(d_in=D_IN, d_out=D_IN)
    if variant in ("multihead", "gated", "mla"):  # heads split one width: no d_v of their own
        return dict(d_in=D_IN, d_out=4, num_heads=2, qkv_bias=True)
    if variant == "multihead_concat":
        return dict(d_in=D_IN, d_out=3, num_heads=2, d_v=2)
    return dict(d_in=D_IN, d_out=3, d_v=2, qkv_bias=True)


# The newer options, each on a variant that takes it (multihead: head_dim 2, even as rope needs).
EXTRA_OPTIONS = {
    "window": ("self", dict(window=2)),
    "gqa": ("multihead", dict(num_heads=4, kv_heads=2)),
    "mqa-alibi-window": ("multihead", dict(num_heads=2, kv_heads=1, position="alibi", window=2)),
    "mqa-rope-window": ("multihead", dict(num_heads=2, kv_heads=1, position="rope", window=3)),
    "alibi": ("multihead_concat", dict(d_out=2, position="alibi")),
    "sink-learned-alibi": ("multihead", dict(sink="learned", position="alibi")),
    "sink-zero-window": ("multihead", dict(sink="zero", window=2)),
    "gated-headwise-sink": ("gated", dict(gate="headwise", sink="learned")),
}


def cases():
    # Softmax attention here; the mixers that replace it (linear, sigmoid, conv) in test_mixers.py.
    variants = [(variant, variant, {}) for variant in VARIANTS if ATTENTION_REGISTRY[variant].kind == "softmax"]
    variants += [(name, variant, extra) for name, (variant, extra) in EXTRA_OPTIONS.items()]
    for (label, variant, extra), causal, padded, need_weights in itertools.product(
            variants, (False, True), (False, True), (False, True)):
        if (causal and variant == "cross") or (extra and not padded):  # padding covers the unpadded paths
            continue
        name = f"{label}-{'causal' if causal else 'full'}-{'padded' if padded else 'unpadded'}-{'math' if need_weights else 'fused'}"
        yield pytest.param(variant, extra, causal, padded, need_weights, id=name)


@pytest.mark.parametrize("variant, extra, causal, padded, need_weights", cases())
def test_module_gradcheck(variant, extra, causal, padded, need_weights):
    torch.manual_seed(0)
    module = build_attention(variant, causal=causal, **{**options(variant), **extra}).double()
    names = [name for name, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for p in module.parameters()]
    cross = variant == "cross"
    x = torch.randn(BATCH, T_Q, D_IN, dtype=torch.float64, requires_grad=True)
    source = torch.randn(BATCH, T_K, D_IN, dtype=torch.float64, requires_grad=True) if cross else None
    padding = (CROSS_PADDING if cross else SELF_PADDING) if padded else None

    def run(x, source, *params):
        context, weights = functional_call(
            module, dict(zip(names, params, strict=True)), (x, source),
            dict(key_padding_mask=padding, need_weights=need_weights),
        )
        return (context, weights) if need_weights else context

    inputs = (x, source, *params) if cross else (x, None, *params)
    assert gradcheck(run, inputs, eps=1e-6, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("need_weights", [False, True], ids=["fused", "math"])
@pytest.mark.parametrize("masking", ["none", "causal", "mask", "both"])
@pytest.mark.parametrize("extra", ["plain", "window-bias-gqa"])
def test_attend_gradcheck(masking, need_weights, extra):
    g = torch.Generator().manual_seed(1)
    kv_heads = 1 if extra == "window-bias-gqa" else 3
    q = torch.randn(2, 3, 4, 3, dtype=torch.float64, generator=g, requires_grad=True)
    k = torch.randn(2, kv_heads, 5, 3, dtype=torch.float64, generator=g, requires_grad=True)
    v = torch.randn(2, kv_heads, 5, 2, dtype=torch.float64, generator=g, requires_grad=True)
    mask = None
    if masking in ("mask", "both"):
        mask = torch.rand(4, 5, generator=g) < 0.6
        mask[0] = False  # a query with nothing to attend to
    causal = masking in ("causal", "both")
    options = {}
    if extra == "window-bias-gqa":
        options = dict(window=2, bias=torch.randn(3, 4, 5, dtype=torch.float64, generator=g), enable_gqa=True)

    def run(q, k, v):
        context, weights = attend(q, k, v, causal=causal, mask=mask, need_weights=need_weights, **options)
        return (context, weights) if need_weights else context

    assert gradcheck(run, (q, k, v), eps=1e-6, atol=1e-5, rtol=1e-4)
