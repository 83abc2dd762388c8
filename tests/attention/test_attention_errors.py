"""Every bad argument fails early with a message that names it, and an error that carries it."""

from __future__ import annotations

import pickle

import pytest
import torch

from attention_lab.attention import ATTENTION_REGISTRY, VARIANTS, AttentionArgumentError, attend, build_attention
from attention_lab.attention.base import AttentionModule

SINGLE_HEAD = ("simple", "self", "cross")


def test_unknown_name_lists_the_valid_names():
    with pytest.raises(ValueError, match="unknown attention 'flash'") as error:
        build_attention("flash", d_in=4, d_out=4)
    for name in VARIANTS:
        assert name in str(error.value)
    assert (error.value.argument, error.value.value) == ("name", "flash")


# build_attention applies one rule, arguments.check_positive_int, to d_in, d_out, num_heads and d_v (d_v=None means
# "as d_out": not checked), for every variant alike and before any rule of the variant's own or its constructor. So
# one row per kind of bad value; each argument once; and, per rule that would answer in its place were the shared
# check moved after it (or left to the constructors), one row on a variant where that rule would fire.
SIZE_VALUES = (0, -1, 2.0, "4", True, None)  # zero, negative, float, string, bool, missing
BAD_SIZES = [
    # every kind of value, on the number multihead's constructor divides d_out by (0: ZeroDivisionError)
    *(pytest.param("multihead", "num_heads", value, id=f"num_heads={value!r}") for value in SIZE_VALUES),
    pytest.param("self", "num_heads", -1, id="single-head-rule"),  # num_heads must be 1 for 'self'
    pytest.param("cross", "d_in", 0, id="d_in-cross"),  # nn.Linear(0, d_out) builds: only the check refuses it
    pytest.param("simple", "d_out", 0, id="d_out-simple"),  # simple: d_out must equal d_in
    pytest.param("multihead", "d_v", 0, id="d_v-multihead"),  # d_v must equal d_out
    pytest.param("conv", "d_v", "4", id="d_v-no-projections"),  # conv: no query/key projections, d_v = d_out
    pytest.param("diff", "d_out", -1, id="d_out-diff"),  # diff: num_heads must divide d_out / 2
    pytest.param("mla", "d_out", 2.0, id="d_out-mla-latent-widths"),  # mla: kv_latent defaults to 4 d_out / num_heads
    pytest.param("retnet", "d_out", 0, id="recurrence-causal-only"),  # causal must be True (False here)
    pytest.param("based", "d_in", True, id="hybrid-based"),  # linear attention + window + short conv; feature_dim
]


@pytest.mark.parametrize("variant, argument, value", BAD_SIZES)
def test_sizes_must_be_positive_integers(variant, argument, value):
    kwargs = {"d_in": 4, "d_out": 4, argument: value}
    with pytest.raises(ValueError, match=rf"{argument} must be a positive integer, got {value!r}") as error:
        build_attention(variant, **kwargs)
    assert error.value.argument == argument and error.value.allowed == "a positive integer"


def test_the_checks_before_the_variant_code_are_the_same_for_every_variant():
    """Why the rows above and below name a few variants, not all: build_attention checks the shared arguments
    before it calls a class, and no variant replaces AttentionModule.forward, whose checks (source, shape of x) come
    before the variant's project(). A variant that overrides forward fails here: give its own checks rows."""
    assert [name for name in VARIANTS if ATTENTION_REGISTRY[name].forward is not AttentionModule.forward] == []


@pytest.mark.parametrize("d_out, num_heads", [(5, 2), (6, 4), (1, 3)])
def test_multihead_d_out_divisible_by_heads(d_out, num_heads):
    with pytest.raises(ValueError, match=rf"d_out \({d_out}\) must be divisible by num_heads \({num_heads}\)") as error:
        build_attention("multihead", d_in=4, d_out=d_out, num_heads=num_heads)
    assert (error.value.argument, error.value.value) == ("num_heads", num_heads)


def test_multihead_d_v_must_equal_d_out():
    with pytest.raises(ValueError, match="d_v must equal d_out for 'multihead'"):
        build_attention("multihead", d_in=4, d_out=4, num_heads=2, d_v=6)


# One function, arguments.check_dropout, for every variant; build_attention applies it before the rules that refuse a
# dropout (``rejects``) and the causal-only rule. So every kind of value once, and one row where those rules would
# answer in its place (a float("0.1") in the constructor would take the string silently).
BAD_DROPOUTS = [
    # False, not True: True is also out of range, False (0) only a bool
    *(pytest.param("multihead", value, id=f"dropout={value!r}") for value in (-0.1, 1.0, 1.5, "0.1", False, float("nan"))),
    pytest.param("retnet", 1.5, id="refused-and-causal-only"),  # retnet refuses dropout and is causal-only
]


@pytest.mark.parametrize("variant, dropout", BAD_DROPOUTS)
def test_dropout_in_zero_one(variant, dropout):
    with pytest.raises(ValueError, match=r"dropout must be a number in \[0, 1\)") as error:
        build_attention(variant, d_in=4, d_out=4, dropout=dropout)
    assert error.value.argument == "dropout"


@pytest.mark.parametrize("variant", SINGLE_HEAD)
def test_single_head_variants_reject_several_heads(variant):
    with pytest.raises(ValueError, match=rf"num_heads must be 1 for '{variant}'.*use .*'multihead'") as error:
        build_attention(variant, d_in=4, d_out=4, num_heads=2)
    assert (error.value.argument, error.value.value) == ("num_heads", 2)


def test_cross_needs_source():
    module = build_attention("cross", d_in=4, d_out=4)
    with pytest.raises(ValueError, match="needs `source`"):
        module(torch.randn(3, 4))


def test_self_attention_takes_no_source():
    # AttentionModule.forward's check, before any variant code (see the test above): one self-attending variant.
    module = build_attention("self", d_in=4, d_out=4)
    with pytest.raises(ValueError, match="takes no `source`; use the 'cross' variant"):
        module(torch.randn(3, 4), torch.randn(5, 4))


def test_cross_rejects_causal():
    with pytest.raises(ValueError, match="causal must be False for 'cross'") as error:
        build_attention("cross", d_in=4, d_out=4, causal=True)
    assert error.value.argument == "causal"


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


# AttentionModule.forward's check, before any variant code: too few and too many dimensions, on a self-attending variant
# and on cross (which checks its source first).
@pytest.mark.parametrize("variant, shape", [("self", (4,)), ("self", (1, 2, 3, 4)), ("cross", (4,))])
def test_input_must_be_2d_or_3d(variant, shape):
    module = build_attention(variant, d_in=4, d_out=4, causal=ATTENTION_REGISTRY[variant].causal_only)
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


# ---------------------------------------------------------------------------------------------
# AttentionArgumentError: every constructor check names its argument in a structured field
# ---------------------------------------------------------------------------------------------

BAD_ARGUMENTS = [
    # (variant, build_attention keywords, the argument to blame)
    ("simple", dict(d_out=3), "d_out"),
    ("simple", dict(d_v=2), "d_v"),
    ("simple", dict(qkv_bias=True), "qkv_bias"),
    ("simple", dict(normalize="max"), "normalize"),
    ("self", dict(normalize="sum"), "normalize"),  # an option of another variant
    ("multihead", dict(flash=True), "flash"),
    ("multihead", dict(num_heads=2, d_v=6), "d_v"),
    ("multihead", dict(d_out=6, num_heads=4), "num_heads"),
    ("self", dict(qkv_bias="yes"), "qkv_bias"),
    ("self", dict(causal=1), "causal"),
    ("cross", dict(causal=True), "causal"),
    # grouped-query attention
    ("multihead", dict(d_out=12, num_heads=4, kv_heads=3), "kv_heads"),
    ("multihead", dict(d_out=12, num_heads=4, kv_heads=8), "kv_heads"),
    ("multihead", dict(num_heads=2, kv_heads=0), "kv_heads"),
    ("multihead", dict(num_heads=2, kv_heads=1.0), "kv_heads"),
    ("multihead", dict(num_heads=2, kv_heads=True), "kv_heads"),
    ("self", dict(kv_heads=2), "kv_heads"),
    ("multihead_concat", dict(num_heads=2, kv_heads=1), "kv_heads"),
    # sliding windows: arguments.check_window, one rule for every variant (the variants that refuse a window say so
    # naming it too: test_mixers.py, test_variant_recurrences.py), every kind of value once
    *(("multihead", dict(window=window), "window") for window in (0, -2, 2.5, "4", True)),
    # positions that do not exist: arguments.check_position, one rule for every variant, every kind of value once,
    # and a causal-only variant (built with causal=False: the causal-only rule comes after)
    *(("multihead", dict(position=position), "position") for position in ("rotary", "ROPE", 1)),
    ("retnet", dict(position=1), "position"),
    ("simple", dict(position="rope"), "position"),
    ("simple", dict(position="alibi"), "position"),
    ("cross", dict(position="rope"), "position"),
    ("cross", dict(position="alibi"), "position"),
    ("self", dict(d_out=3, position="rope"), "position"),  # rope rotates feature pairs
    ("multihead", dict(d_out=6, num_heads=2, position="rope"), "position"),
    ("multihead_concat", dict(d_out=3, num_heads=2, position="rope"), "position"),
]


@pytest.mark.parametrize("variant, kwargs, argument", BAD_ARGUMENTS)
def test_bad_argument_is_named_in_the_error(variant, kwargs, argument):
    kwargs = {"d_in": 4, "d_out": 4, **kwargs}
    with pytest.raises(AttentionArgumentError) as error:
        build_attention(variant, **kwargs)
    err = error.value
    assert isinstance(err, ValueError)
    assert err.argument == argument
    assert err.value is kwargs[argument]
    assert err.allowed and "\n" not in err.allowed
    message = str(err)
    assert "\n" not in message and argument in message


@pytest.mark.parametrize("variant", ["simple", "cross"])
@pytest.mark.parametrize("position", ["rope", "alibi"])
def test_rope_and_alibi_rejected_where_they_make_no_sense(variant, position):
    with pytest.raises(AttentionArgumentError, match=rf"position='{position}' is not possible for '{variant}'") as error:
        build_attention(variant, d_in=4, d_out=4, position=position)
    assert error.value.allowed == f"one of none, learned, sinusoidal for '{variant}'"


def test_kv_heads_must_divide_num_heads():
    with pytest.raises(AttentionArgumentError, match=r"kv_heads must be a divisor of num_heads \(4\), got 3"):
        build_attention("multihead", d_in=4, d_out=8, num_heads=4, kv_heads=3)


def test_kv_heads_is_only_for_grouped_variants():
    grouped = sorted(name for name, cls in ATTENTION_REGISTRY.items() if cls.grouped_kv)
    assert grouped == ["diff", "gated", "linear", "multihead", "sigmoid"]
    with pytest.raises(AttentionArgumentError, match=r"kv_heads is for grouped-query attention \('diff', 'gated', "
                                                     r"'linear', 'multihead' or 'sigmoid'\)"):
        build_attention("self", d_in=4, d_out=4, kv_heads=2)
    # kv_heads equal to num_heads is what every variant does anyway: accepted.
    for variant in VARIANTS:
        heads = 2 if ATTENTION_REGISTRY[variant].multi_head else 1
        build_attention(variant, d_in=4, d_out=4, num_heads=heads, kv_heads=heads,
                        causal=ATTENTION_REGISTRY[variant].causal_only)


def test_multihead_concat_d_out_for_names_num_heads():
    cls = ATTENTION_REGISTRY["multihead_concat"]
    assert cls.d_out_for(12, 4) == 3
    with pytest.raises(AttentionArgumentError, match=r"num_heads \(5\) must divide d_model \(12\)") as error:
        cls.d_out_for(12, 5)
    assert (error.value.argument, error.value.value) == ("num_heads", 5)
    assert error.value.allowed == "a divisor of d_model=12: 1, 2, 3, 4, 6 or 12"  # what to choose instead


def test_error_keeps_its_fields_through_pickle():
    with pytest.raises(AttentionArgumentError) as error:
        build_attention("multihead", d_in=4, d_out=8, num_heads=4, kv_heads=3)
    copy = pickle.loads(pickle.dumps(error.value))
    assert type(copy) is AttentionArgumentError
    assert (copy.argument, copy.value, copy.allowed, str(copy)) == (
        "kv_heads", 3, "a divisor of num_heads (4): 1, 2 or 4", str(error.value))
