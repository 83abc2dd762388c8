"""Every bad argument fails early with a message that names it."""

from __future__ import annotations

import pytest
import torch

from attention_lab.attention import VARIANTS, attend, build_attention

SINGLE_HEAD = ("simple", "self", "cross")


def test_unknown_name_lists_the_valid_names():
    with pytest.raises(ValueError, match="unknown attention 'flash'") as error:
        build_attention("flash", d_in=4, d_out=4)
    for name in VARIANTS:
        assert name in str(error.value)


BAD_SIZES = [
    (argument, value)
    for argument in ("d_in", "d_out", "num_heads", "d_v")
    for value in (0, -1, 2.0, "4", True, None)
    if (argument, value) != ("d_v", None)  # d_v=None means "same as d_out"
]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("argument, value", BAD_SIZES)
def test_sizes_must_be_positive_integers(variant, argument, value):
    kwargs = {"d_in": 4, "d_out": 4, argument: value}
    with pytest.raises(ValueError, match=rf"{argument} must be a positive integer, got {value!r}"):
        build_attention(variant, **kwargs)


@pytest.mark.parametrize("d_out, num_heads", [(5, 2), (6, 4), (1, 3)])
def test_multihead_d_out_divisible_by_heads(d_out, num_heads):
    with pytest.raises(ValueError, match=rf"d_out \({d_out}\) must be divisible by num_heads \({num_heads}\)"):
        build_attention("multihead", d_in=4, d_out=d_out, num_heads=num_heads)


def test_multihead_d_v_must_equal_d_out():
    with pytest.raises(ValueError, match="d_v must equal d_out for 'multihead'"):
        build_attention("multihead", d_in=4, d_out=4, num_heads=2, d_v=6)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("dropout", [-0.1, 1.0, 1.5, "0.1", True, float("nan")])
def test_dropout_in_zero_one(variant, dropout):
    with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\)"):
        build_attention(variant, d_in=4, d_out=4, dropout=dropout)


@pytest.mark.parametrize("variant", SINGLE_HEAD)
def test_single_head_variants_reject_several_heads(variant):
    with pytest.raises(ValueError, match=rf"num_heads must be 1 for '{variant}'.*use 'multihead'"):
        build_attention(variant, d_in=4, d_out=4, num_heads=2)


def test_cross_needs_source():
    module = build_attention("cross", d_in=4, d_out=4)
    with pytest.raises(ValueError, match="needs `source`"):
        module(torch.randn(3, 4))


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v != "cross"])
def test_self_attention_takes_no_source(variant):
    module = build_attention(variant, d_in=4, d_out=4)
    with pytest.raises(ValueError, match="takes no `source`; use the 'cross' variant"):
        module(torch.randn(3, 4), torch.randn(5, 4))


def test_cross_rejects_causal():
    with pytest.raises(ValueError, match="causal must be False for 'cross'"):
        build_attention("cross", d_in=4, d_out=4, causal=True)


def test_simple_needs_d_out_equal_d_in():
    with pytest.raises(ValueError, match="d_out must equal d_in for 'simple'.*d_in=4, d_out=3"):
        build_attention("simple", d_in=4, d_out=3)
    with pytest.raises(ValueError, match="d_out must equal d_in for 'simple'"):
        build_attention("simple", d_in=4, d_out=4, d_v=2)


def test_simple_has_no_bias_and_two_normalizations():
    with pytest.raises(ValueError, match="qkv_bias must be False for 'simple'"):
        build_attention("simple", d_in=4, d_out=4, qkv_bias=True)
    with pytest.raises(ValueError, match="normalize must be one of softmax, sum, got 'max'"):
        build_attention("simple", d_in=4, d_out=4, normalize="max")


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("shape", [(4,), (1, 2, 3, 4)])
def test_input_must_be_2d_or_3d(variant, shape):
    module = build_attention(variant, d_in=4, d_out=4)
    source = torch.randn(3, 4) if variant == "cross" else None
    with pytest.raises(ValueError, match=r"x must be \(T, d_in\) or \(B, T, d_in\)"):
        module(torch.randn(*shape), source)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64, torch.uint8])
@pytest.mark.parametrize("need_weights", [False, True])
def test_attend_mask_must_be_boolean(dtype, need_weights):
    q = k = v = torch.randn(2, 3, 4)
    mask = torch.ones(3, 3, dtype=dtype)
    # A wrong dtype is a bad argument like the others: ValueError.
    with pytest.raises(ValueError, match=r"mask must be a boolean tensor \(True = may attend\), got torch\."):
        attend(q, k, v, mask=mask, need_weights=need_weights)


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_key_padding_mask_must_be_boolean(dtype):
    module = build_attention("self", d_in=4, d_out=4)
    with pytest.raises(ValueError, match="key_padding_mask must be a boolean tensor"):
        module(torch.randn(2, 3, 4), key_padding_mask=torch.ones(2, 3, dtype=dtype))


def test_key_padding_mask_shape_is_checked():
    module = build_attention("self", d_in=4, d_out=4)
    with pytest.raises(ValueError, match=r"key_padding_mask must have shape \(B, T_k\) = \(2, 3\), got \(2, 5\)"):
        module(torch.randn(2, 3, 4), key_padding_mask=torch.zeros(2, 5, dtype=torch.bool))
