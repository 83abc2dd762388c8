"""Grouped-query attention, sliding windows, RoPE and ALiBi, and how a variant joins the registry.

The references here are independent of the library: ch. 3's MultiHeadAttention written out, GQA as a
multihead whose key/value weights are repeated per group, RoPE as complex multiplication and ALiBi's
slopes as printed by the paper's reference code.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_attention_reference import assert_close, paper_alibi_slopes, reference_rope
from torch import nn

import attention_lab.attention as attention_package
from attention_lab.attention import ATTENTION_REGISTRY, VARIANTS, AttentionModule, build_attention
from attention_lab.attention.alibi import alibi_slopes
from attention_lab.attention.registry import register
from attention_lab.attention.rope import apply_rope

SOFTMAX_VARIANTS = [v for v in VARIANTS if ATTENTION_REGISTRY[v].kind == "softmax"]
# The variants that take a window: softmax attention and sigmoid attention (linear and conv read every key).
WINDOWED_VARIANTS = [v for v in VARIANTS if ATTENTION_REGISTRY[v].kind in ("softmax", "sigmoid")]

# ---------------------------------------------------------------------------------------------
# one file per variant
# ---------------------------------------------------------------------------------------------


def plain_and_with(variant: str, *, d_out: int = 4, num_heads: int = 1, causal: bool = False, **option):
    """The variant without and with ``option``, each built from seed 0: the same weights."""
    torch.manual_seed(0)
    plain = build_attention(variant, d_in=4, d_out=d_out, num_heads=num_heads, causal=causal)
    torch.manual_seed(0)
    return plain, build_attention(variant, d_in=4, d_out=d_out, num_heads=num_heads, causal=causal, **option)


@pytest.mark.parametrize("variant", VARIANTS)
def test_every_variant_declares_what_it_is(variant):
    cls = ATTENTION_REGISTRY[variant]
    for attribute in ("takes_source", "multi_head", "grouped_kv", "projects"):
        assert isinstance(getattr(cls, attribute), bool), attribute
    assert isinstance(cls.options, tuple)
    d_model = 24  # heads 1 to 4 split it, and diff's two halves of every head too
    for heads in (1, 2, 3, 4) if cls.multi_head else (1,):
        module = build_attention(variant, d_in=d_model, d_out=cls.d_out_for(d_model, heads), num_heads=heads,
                                 causal=cls.causal_only)
        x = torch.randn(2, 5, d_model)
        context, weights = module(x, x if cls.takes_source else None, need_weights=True)
        assert module.output_dim == d_model and context.shape == (2, 5, d_model)
        assert weights.shape == (2, heads, 5, 5)


def test_the_declarations_match_the_variants():
    # The reference names the lab's own variants: one added in its own file (tests/test_extension.py) is not in it.
    declared = {name: (cls.takes_source, cls.multi_head, cls.grouped_kv, cls.projects)
                for name, cls in ATTENTION_REGISTRY.items()}
    expected = {
        "simple": (False, False, False, False),
        "self": (False, False, False, True),
        "cross": (True, False, False, True),
        "multihead": (False, True, True, True),
        "multihead_concat": (False, True, False, True),
        "linear": (False, True, True, False),
        "sigmoid": (False, True, True, True),
        "conv": (False, True, False, False),
        "diff": (False, True, True, True),
        "gated": (False, True, True, True),
        "gated_deltanet": (False, True, False, False),
        "mamba2": (False, True, False, False),
        "based": (False, True, False, False),
        "retnet": (False, True, False, False),
        "mla": (False, True, False, True),
    }
    assert {name: declared.get(name) for name in expected} == expected
    causal_only = sorted(name for name in expected if ATTENTION_REGISTRY[name].causal_only)
    assert causal_only == ["based", "gated_deltanet", "mamba2", "retnet"]
    assert ATTENTION_REGISTRY["simple"].options == ("normalize",)


def test_register_refuses_a_class_that_does_not_declare_itself():
    class Undeclared(AttentionModule):
        takes_source = False

    with pytest.raises(TypeError, match="must declare multi_head, grouped_kv, projects as bool"):
        register("undeclared")(Undeclared)
    assert "undeclared" not in ATTENTION_REGISTRY


NEW_VARIANT = '''
from attention_lab.attention.registry import register
from attention_lab.attention.self_attention import SelfAttention


@register("added")
class AddedAttention(SelfAttention):
    takes_source = False
    multi_head = False
    grouped_kv = False
    projects = True
'''


def test_a_variant_in_a_new_file_is_discovered(tmp_path):
    """Copy the package, add one file, and nothing else: the new name is built like the others."""
    source = Path(attention_package.__file__).parent
    package = tmp_path / "attention_lab"
    shutil.copytree(source, package / "attention", ignore=shutil.ignore_patterns("__pycache__"))
    (package / "__init__.py").write_text("")
    shutil.copy(source.parent / "lazy_registry.py", package)  # the registry's one import outside the package
    (package / "attention" / "added.py").write_text(NEW_VARIANT)
    program = ("import attention_lab.attention as a; print(a.__file__); print(' '.join(a.VARIANTS)); "
               "print(a.build_attention('added', d_in=4, d_out=4)(a.causal_mask(3, 4).float()).context.shape)")
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    result = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    where, names, shape = result.stdout.splitlines()
    assert Path(where).is_relative_to(tmp_path)
    assert names.split() == sorted([*VARIANTS, "added"])
    assert shape == "torch.Size([3, 4])"


# ---------------------------------------------------------------------------------------------
# grouped-query attention
# ---------------------------------------------------------------------------------------------


class Ch3MultiHeadAttention(nn.Module):
    """ch. 3's MultiHeadAttention (LLMs-from-scratch), written out: the multihead of the notebooks."""

    def __init__(self, d_in, d_out, num_heads, qkv_bias=False):
        super().__init__()
        self.d_out, self.num_heads, self.head_dim = d_out, num_heads, d_out // num_heads
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.out_proj = nn.Linear(d_out, d_out)

    def forward(self, x):
        b, t, _ = x.shape
        keys = self.W_key(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        queries = self.W_query(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        values = self.W_value(x).view(b, t, self.num_heads, self.head_dim).transpose(1, 2)
        scores = (queries @ keys.transpose(2, 3)).masked_fill(torch.ones(t, t).triu(1).bool(), -torch.inf)
        weights = torch.softmax(scores / self.head_dim**0.5, dim=-1)
        context = (weights @ values).transpose(1, 2).reshape(b, t, self.d_out)
        return self.out_proj(context), weights


@pytest.mark.parametrize("num_heads", [1, 2, 4])
@pytest.mark.parametrize("qkv_bias", [False, True])
def test_kv_heads_equal_to_num_heads_is_todays_multihead(num_heads, qkv_bias):
    torch.manual_seed(7)
    reference = Ch3MultiHeadAttention(8, 8, num_heads, qkv_bias)
    modules = []
    for kv_heads in (None, num_heads):
        torch.manual_seed(7)
        modules.append(build_attention("multihead", d_in=8, d_out=8, num_heads=num_heads, kv_heads=kv_heads,
                                       qkv_bias=qkv_bias, causal=True))
    x = torch.randn(3, 6, 8)
    expected, expected_weights = reference(x)
    outputs = []
    for module in modules:
        assert list(module.state_dict()) == list(reference.state_dict())
        for name, tensor in reference.state_dict().items():
            assert torch.equal(module.state_dict()[name], tensor), name
        fast = module(x).context
        slow, weights = module(x, need_weights=True)
        assert_close(fast, expected)
        assert_close(slow, expected)
        assert_close(weights, expected_weights)
        outputs.append((fast, slow, weights))
    for ours, theirs in zip(*outputs, strict=True):
        assert torch.equal(ours, theirs)


def repeated_kv_twin(grouped: AttentionModule) -> AttentionModule:
    """A multihead with one kv head per query head, its key/value weights repeat_interleave'd from ``grouped``."""
    h, kv, d = grouped.num_heads, grouped.kv_heads, grouped.head_dim
    twin = build_attention("multihead", d_in=grouped.W_query.in_features, d_out=h * d, num_heads=h,
                           qkv_bias=grouped.W_query.bias is not None, causal=grouped.causal,
                           window=grouped.window, position=grouped.position).double()
    with torch.no_grad():
        twin.W_query.load_state_dict(grouped.W_query.state_dict())
        twin.out_proj.load_state_dict(grouped.out_proj.state_dict())
        for name in ("W_key", "W_value"):
            for param_name, param in getattr(grouped, name).named_parameters():
                # (kv * d, ...) -> (kv, d, ...) -> each kv head h // (H / kv) repeated for its group
                repeated = param.unflatten(0, (kv, d)).repeat_interleave(h // kv, dim=0).flatten(0, 1)
                getattr(getattr(twin, name), param_name).copy_(repeated)
    return twin


@pytest.mark.parametrize("num_heads, kv_heads", [(4, 1), (4, 2), (6, 3), (6, 2)])
@pytest.mark.parametrize("position", [None, "rope", "alibi"])
@pytest.mark.parametrize("causal", [False, True])
def test_grouped_query_attention_is_multihead_with_repeated_kv(num_heads, kv_heads, position, causal):
    torch.manual_seed(3)
    grouped = build_attention("multihead", d_in=5, d_out=num_heads * 2, num_heads=num_heads, kv_heads=kv_heads,
                              qkv_bias=True, causal=causal, window=3, position=position).double()
    assert grouped.W_key.out_features == grouped.W_value.out_features == kv_heads * 2
    twin = repeated_kv_twin(grouped)
    x = torch.randn(2, 7, 5, dtype=torch.float64)
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[1, :3] = True  # left padding: with causal and a window, some queries see nothing
    for need_weights in (False, True):
        ours = grouped(x, key_padding_mask=padding, need_weights=need_weights)
        theirs = twin(x, key_padding_mask=padding, need_weights=True)
        assert_close(ours.context, theirs.context)
        if need_weights:
            assert ours.weights.shape == (2, num_heads, 7, 7)
            assert_close(ours.weights, theirs.weights)


def test_multi_query_attention_has_one_kv_head():
    full = build_attention("multihead", d_in=24, d_out=24, num_heads=12)
    multi_query = build_attention("multihead", d_in=24, d_out=24, num_heads=12, kv_heads=1)
    assert multi_query.W_key.weight.shape == multi_query.W_value.weight.shape == (2, 24)
    count = sum(p.numel() for p in full.parameters()) - sum(p.numel() for p in multi_query.parameters())
    assert count == 2 * (24 - 2) * 24


def test_fully_masked_rows_stay_finite_with_every_option():
    torch.manual_seed(0)
    module = build_attention("multihead", d_in=4, d_out=8, num_heads=4, kv_heads=2, causal=True, window=2,
                             position="alibi")
    x = torch.randn(2, 5, 4, requires_grad=True)
    padding = torch.tensor([[True, True, False, False, False], [False] * 5])  # queries 0, 1 of row 0 see nothing
    for need_weights in (False, True):
        context, weights = module(x, key_padding_mask=padding, need_weights=need_weights)
        empty = module.out_proj.bias  # a zero context, mixed by out_proj
        assert torch.equal(context[0, :2], empty.expand(2, -1))
        assert torch.isfinite(context).all()
        if need_weights:
            assert (weights[0, :, :2] == 0).all() and torch.isfinite(weights).all()
        x.grad = None
        module.zero_grad()
        context.sum().backward()
        assert torch.isfinite(x.grad).all()
        assert all(torch.isfinite(p.grad).all() for p in module.parameters())


# ---------------------------------------------------------------------------------------------
# sliding windows
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("variant, causal", [(v, c) for v in SOFTMAX_VARIANTS for c in (False, True)
                                             if not (c and v == "cross")])
@pytest.mark.parametrize("window", [1, 2, 3])
def test_window_hides_keys_outside_it(variant, causal, window):
    heads = 2 if ATTENTION_REGISTRY[variant].multi_head else 1
    torch.manual_seed(0)
    module = build_attention(variant, d_in=4, d_out=4, num_heads=heads, causal=causal, window=window)
    x = torch.randn(1, 6, 4)
    weights = module(x, x if variant == "cross" else None, need_weights=True).weights[0]  # (H, T, T)
    offset = torch.arange(6)[:, None] - torch.arange(6)[None, :]
    visible = (offset >= 0) & (offset < window) if causal else offset.abs() < window
    assert (weights[:, ~visible] == 0).all()
    assert (weights[:, visible] > 0).all()
    assert_close(weights.sum(dim=-1), torch.ones(heads, 6))


@pytest.mark.parametrize("variant", WINDOWED_VARIANTS)
def test_window_as_long_as_the_sequence_changes_nothing(variant):
    heads = 2 if ATTENTION_REGISTRY[variant].multi_head else 1
    x = torch.randn(2, 5, 4)
    source = x if variant == "cross" else None
    plain, windowed = plain_and_with(variant, num_heads=heads, window=5)
    for need_weights in (False, True):
        assert_close(windowed(x, source, need_weights=need_weights).context,
                     plain(x, source, need_weights=need_weights).context)


def test_causal_window_of_one_attends_to_itself():
    module = build_attention("self", d_in=3, d_out=3, causal=True, window=1)
    x = torch.randn(4, 3)
    for need_weights in (False, True):
        assert_close(module(x, need_weights=need_weights).context, module.W_value(x))


def test_simple_sum_normalization_respects_the_window():
    module = build_attention("simple", d_in=2, d_out=2, normalize="sum", window=2, causal=True)
    x = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]])
    # scores x·xᵀ kept on the band 0 <= i - j < 2, then divided by the row sums.
    expected = torch.tensor([[1.0, 0.0, 0.0], [1 / 3, 2 / 3, 0.0], [0.0, 2 / 6, 4 / 6]])
    assert_close(module(x, need_weights=True).weights[0], expected)


# ---------------------------------------------------------------------------------------------
# positions
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("position", [None, "none", "learned", "sinusoidal"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_positions_outside_attention_change_nothing_here(variant, position):
    heads = 2 if ATTENTION_REGISTRY[variant].multi_head else 1
    x = torch.randn(2, 5, 4)
    source = x if variant == "cross" else None
    plain, module = plain_and_with(variant, num_heads=heads, causal=ATTENTION_REGISTRY[variant].causal_only,
                                   position=position)
    assert module.position is None
    assert torch.equal(module(x, source, need_weights=True).weights, plain(x, source, need_weights=True).weights)


def test_alibi_slopes_are_the_papers():
    # Press et al.: 2^(-8/H) · (1, 2, ..., H) in the exponent when H is a power of two ...
    assert alibi_slopes(8) == [2.0**-e for e in range(1, 9)]
    assert alibi_slopes(1) == [2.0**-8]
    assert alibi_slopes(4) == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8]
    # ... and otherwise those of the power of two below, then every other slope of twice it.
    assert alibi_slopes(6) == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    assert alibi_slopes(12) == pytest.approx([*(2.0**-e for e in range(1, 9)), 2**-0.5, 2**-1.5, 2**-2.5, 2**-3.5])
    for heads in range(1, 65):
        assert alibi_slopes(heads) == pytest.approx(paper_alibi_slopes(heads), rel=1e-12), heads


@pytest.mark.parametrize("causal", [False, True])
def test_alibi_adds_minus_slope_times_distance(causal):
    plain, alibi = (m.double() for m in plain_and_with("multihead", d_out=12, num_heads=3, causal=causal,
                                                       position="alibi"))
    x = torch.randn(1, 6, 4, dtype=torch.float64)
    # log-weights differ from the plain ones by the bias, up to a per-row constant.
    shift = alibi(x, need_weights=True).weights.log() - plain(x, need_weights=True).weights.log()
    slopes = torch.tensor(paper_alibi_slopes(3), dtype=torch.float64)
    distance = (torch.arange(6)[:, None] - torch.arange(6)[None, :]).double()
    expected = -slopes[:, None, None] * distance.abs()
    visible = distance >= 0 if causal else torch.ones(6, 6, dtype=torch.bool)
    difference = shift[0] - expected  # constant along each row, on the visible keys
    for h in range(3):
        for i in range(6):
            row = difference[h, i][visible[i]]
            assert_close(row, row[0].expand_as(row))


def test_rope_is_complex_rotation_and_keeps_norms():
    q, k = torch.randn(2, 3, 7, 8, dtype=torch.float64), torch.randn(2, 1, 5, 8, dtype=torch.float64)
    rotated_q, rotated_k = apply_rope(q, k)
    assert_close(rotated_q, reference_rope(q))
    assert_close(rotated_k, reference_rope(k))
    assert_close(rotated_q.norm(dim=-1), q.norm(dim=-1))
    assert torch.equal(rotated_q[..., 0, :], q[..., 0, :])  # position 0 is not rotated


def test_rope_scores_depend_only_on_the_distance():
    # The same query and key at every position: after rope, score(i, j) is a function of i - j.
    q, k = torch.randn(16, dtype=torch.float64).expand(9, 16), torch.randn(16, dtype=torch.float64).expand(9, 16)
    rotated_q, rotated_k = apply_rope(q, k)
    scores = rotated_q @ rotated_k.T
    for offset in range(-8, 9):
        diagonal = scores.diagonal(-offset)
        assert_close(diagonal, diagonal[0].expand_as(diagonal))
    assert not torch.allclose(scores.diagonal(0)[0], scores.diagonal(-1)[0])


def test_rope_matches_the_hugging_face_llama_formula():
    # Hugging Face's LlamaRotaryEmbedding + apply_rotary_pos_emb, written out for base 10000.
    t, d = 6, 8
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float64) / d))
    freqs = torch.arange(t, dtype=torch.float64)[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    x = torch.randn(1, 2, t, d, dtype=torch.float64)
    halves = torch.cat((-x[..., d // 2:], x[..., : d // 2]), dim=-1)
    expected = x * emb.cos() + halves * emb.sin()
    assert_close(apply_rope(x, x)[0], expected)


def test_rope_changes_scores_but_not_shapes():
    plain, rope = plain_and_with("multihead", d_out=8, num_heads=2, position="rope")
    x = torch.randn(2, 5, 4)
    ours, theirs = rope(x, need_weights=True), plain(x, need_weights=True)
    assert ours.weights.shape == theirs.weights.shape == (2, 2, 5, 5)
    assert not torch.allclose(ours.weights, theirs.weights)
