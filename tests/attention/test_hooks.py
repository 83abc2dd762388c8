"""Hook points: capture() sees exactly what attention computes (against a float64 reference written here),
intervene() changes it, and neither leaves a trace on the model afterwards."""

from __future__ import annotations

import copy
import math

import pytest
import torch

from attention_lab.attention import build_attention
from attention_lab.attention.hooks import (
    HookPointError,
    capture,
    hook_points,
    intervene,
    replace_heads,
    uniform_heads,
    zero_heads,
)
from attention_lab.config import BlockConfig, ModelConfig
from attention_lab.model import SequenceModel


def reference(module, x: torch.Tensor) -> dict[str, torch.Tensor]:
    """Causal multi-head attention by hand, in float64: scores, weights and each head's output."""
    b, t, _ = x.shape
    heads, kv_heads, d = module.num_heads, module.kv_heads, module.head_dim
    q = (x @ module.W_query.weight.T).view(b, t, heads, d).transpose(1, 2)
    k = (x @ module.W_key.weight.T).view(b, t, kv_heads, d).transpose(1, 2)
    v = (x @ module.W_value.weight.T).view(b, t, kv_heads, d).transpose(1, 2)
    k, v = k.repeat_interleave(heads // kv_heads, dim=1), v.repeat_interleave(heads // kv_heads, dim=1)
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    later = torch.ones(t, t, dtype=torch.bool).triu(1)
    scores = scores.masked_fill(later, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return {"scores": scores, "weights": weights, "head_output": weights @ v}


@pytest.mark.parametrize("kv_heads", [None, 2])
def test_hooks_see_exactly_what_the_weights_path_returns(kv_heads):
    torch.manual_seed(0)
    module = build_attention("multihead", d_in=16, d_out=16, num_heads=4, kv_heads=kv_heads, causal=True).double()
    x = torch.randn(3, 7, 16, dtype=torch.float64)
    with capture(module) as cache:
        context, weights = module(x, need_weights=True)
    expected = reference(module, x)
    for point in ("scores", "weights", "head_output"):
        torch.testing.assert_close(cache[f"hook_{point}"], expected[point], rtol=1e-12, atol=1e-12)
    assert torch.equal(cache["hook_weights"], weights)  # the hook and the returned weights are one tensor
    torch.testing.assert_close(context, module.out_proj(expected["head_output"].transpose(1, 2).reshape(3, 7, 16)))


def tiny_model(name: str = "multihead", layers: int = 2, **options) -> SequenceModel:
    torch.manual_seed(1)
    config = ModelConfig(name=name, d_model=16, num_heads=4 if name == "multihead" else 1, layers=layers,
                         mask="causal" if name != "cross" else "none",
                         block=BlockConfig(name="transformer"), **options)
    return SequenceModel(config, vocab_size=11).eval()


TOKENS = torch.tensor([[2, 3, 4, 5, 2, 3, 4, 5], [6, 7, 8, 6, 7, 8, 9, 10]])


def test_capture_keeps_each_layers_tensors_and_the_fused_output():
    model = tiny_model()
    plain = model(TOKENS)
    with capture(model, points=("weights",)) as cache:
        captured = model(TOKENS)
    assert set(cache) == {"blocks.0.attention.hook_weights", "blocks.1.attention.hook_weights"}
    assert [tuple(w.shape) for w in cache.layers("weights")] == [(2, 4, 8, 8)] * 2
    torch.testing.assert_close(captured, plain)  # the weights path gives the fused path's logits
    assert all(torch.allclose(w.sum(-1), torch.ones(1)) for w in cache.layers("weights"))


def test_capture_and_intervention_leave_the_model_as_it_was():
    model = tiny_model()
    state = copy.deepcopy(model.state_dict())
    before = model(TOKENS)
    with capture(model):
        model(TOKENS)
    with intervene(model, {"blocks.0.attention.hook_head_output": zero_heads([0, 1])}):
        changed = model(TOKENS)
    with pytest.raises(RuntimeError), intervene(model, {"blocks.1.attention.hook_scores": uniform_heads([2])}):
        raise RuntimeError("an error inside the block")
    assert not torch.allclose(changed, before)
    assert all(not point.active for point in hook_points(model).values())
    assert all(torch.equal(state[key], value) for key, value in model.state_dict().items())
    assert torch.equal(model(TOKENS), before)


def test_an_unknown_hook_name_names_what_there_is():
    model = tiny_model()
    with pytest.raises(HookPointError) as info, capture(model, names=["blocks.7.attention.hook_weights"]):
        pass
    assert info.value.name == "blocks.7.attention.hook_weights"
    assert "blocks.0.attention.hook_scores" in info.value.available


@pytest.mark.parametrize("name", ["multihead", "self", "cross"])
def test_zeroing_every_head_equals_attention_zeroed_by_hand(name):
    model = tiny_model(name)
    by_hand = copy.deepcopy(model)
    with torch.no_grad():  # no value bias: zero values make every head's output exactly zero
        for block in by_hand.blocks:
            block.attention.W_value.weight.zero_()
    heads = model.blocks[0].attention.num_heads
    edits = {f"blocks.{layer}.attention.hook_head_output": zero_heads(range(heads)) for layer in range(2)}
    with intervene(model, edits):
        ablated = model(TOKENS)
    assert torch.equal(ablated, by_hand(TOKENS))


def test_patching_an_input_onto_itself_changes_nothing():
    model = tiny_model()
    with capture(model, points=("head_output",)) as cache:
        clean = model(TOKENS)
    edits = {name: replace_heads(output, range(4)) for name, output in cache.items()}
    with intervene(model, edits):
        patched = model(TOKENS)
    assert torch.equal(patched, clean)


def test_patching_from_another_input_moves_the_output_towards_it():
    model = tiny_model()
    other = TOKENS.flip(0)
    with capture(model, points=("head_output",)) as cache:
        target = model(other)
    name = "blocks.1.attention.hook_head_output"
    with intervene(model, {name: replace_heads(cache[name], range(4))}):
        patched = model(TOKENS)
    clean = model(TOKENS)
    assert (patched - target).abs().mean() < (clean - target).abs().mean()


def test_uniform_scores_give_uniform_weights_over_the_allowed_keys():
    model = tiny_model()
    with intervene(model, {"blocks.0.attention.hook_scores": uniform_heads([1])}), \
            capture(model, points=("weights",)) as cache:
        model(TOKENS)
    weights = cache.layers("weights")[0][0, 1]  # (T, T) of head 1
    expected = torch.tril(torch.ones(8, 8)) / torch.arange(1, 9)[:, None]
    torch.testing.assert_close(weights, expected)


@pytest.mark.parametrize("name", ["linear", "sigmoid", "conv"])
@pytest.mark.parametrize("causal", [False, True])
def test_the_substitutes_show_their_maps_through_the_hooks(name, causal):
    """linear, sigmoid and conv have attend() of their own: capture() still sees the T x T map their weights path
    returns, the output is the fast path's, and zeroing every head through intervene() silences the mixer."""
    torch.manual_seed(0)
    heads = 1 if name == "conv" else 2
    module = build_attention(name, d_in=8, d_out=8, num_heads=heads, causal=causal).double()
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    fast = module(x).context
    with capture(module) as cache:
        hooked = module(x).context
    context, weights = module(x, need_weights=True)
    assert torch.equal(cache["hook_weights"], weights) and weights.shape == (2, heads, 6, 6)
    torch.testing.assert_close(hooked, fast, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(context, fast, rtol=1e-9, atol=1e-12)
    with intervene(module, {"hook_head_output": zero_heads(list(range(heads)))}):
        silenced = module(x).context
    bias = module.out_proj.bias if getattr(module.out_proj, "bias", None) is not None else torch.zeros(8).double()
    torch.testing.assert_close(silenced, bias.expand_as(silenced))
    assert not any(point.active for point in hook_points(module).values())
