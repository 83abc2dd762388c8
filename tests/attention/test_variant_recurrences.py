"""What the recurrences over time (based, gated_deltanet, mamba2, retnet) share: the fast path, the weights path and
the float64 reference of each (attention_lab.attention.references, written from its paper) agree; causality on
both paths, the map through the hooks, the key masks they take, the settings they refuse (in build_attention and
in the config, one line each), gradients, and a short training run through scripts/train.py. What is each one's
own (its chunked form's pieces, its map's shape): test_variant_<name>.py.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from test_attention_reference import ATOL, assert_close
from torch.autograd import gradcheck
from torch.func import functional_call

from attention_lab.attention import AttentionArgumentError, build_attention
from attention_lab.attention.hooks import capture, intervene, zero_heads
from attention_lab.attention.references import (
    based_reference,
    gated_deltanet_reference,
    mamba2_reference,
    retnet_reference,
)
from attention_lab.checks import validate
from attention_lab.errors import ConfigError
from attention_lab.run.preflight import check_run
from conftest import compose_config, run_train

RECURRENCES = ("based", "gated_deltanet", "mamba2", "retnet")
# Small versions of their own options for the gradient checks (retnet has no short convolution).
SMALL = {"based": dict(short_conv=2, feature_dim=3, window_size=3), "gated_deltanet": dict(short_conv=2),
         "mamba2": dict(short_conv=2), "retnet": {}}

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def module_of(variant: str, **options):
    torch.manual_seed(0)
    return build_attention(variant, **{"d_in": 8, "d_out": 8, "num_heads": 2, "causal": True, **options})


# Each variant against its reference: (heads, T, options) below a chunk, one chunk exactly, past it, several chunks,
# tiny chunks and without the short convolution; based's window inside T or not.
CASES = {
    "based": [(2, 5, dict(window_size=3)), (1, 64, dict(window_size=0)), (4, 65, dict(feature_dim=4)),
              (2, 150, dict(feature_dim=4, window_size=8)), (2, 23, dict(chunk=4, window_size=5)),
              (2, 9, dict(short_conv=0, window_size=2)), (1, 30, dict(short_conv=2, chunk=7, window_size=0, feature_dim=5))],
    "gated_deltanet": [(2, 5, {}), (1, 64, {}), (4, 65, {}), (2, 150, {}), (2, 23, dict(chunk=4)),
                       (2, 9, dict(short_conv=0)), (1, 12, dict(short_conv=3, chunk=5))],
    "mamba2": [(2, 5, {}), (1, 64, {}), (4, 65, {}), (2, 150, {}), (2, 23, dict(chunk=4)), (2, 9, dict(short_conv=0)),
               (1, 12, dict(short_conv=2, chunk=5)), (4, 70, dict(ngroups=2, chunk=16)), (2, 7, dict(ngroups=2))],
    "retnet": [(2, 5, {}), (1, 64, {}), (4, 65, {}), (2, 150, {}), (2, 23, dict(chunk=4)), (3, 12, dict(chunk=5))],
}
# (reference, d_model, atol of the map, of the weights path's output, of the fast path's output): retnet's norm
# divides by each head's spread, which magnifies float32's rounding; d_model 12 gives its 3 heads a whole width.
AGAINST = {"based": (based_reference, 8, ATOL, ATOL, 2e-5),
           "gated_deltanet": (gated_deltanet_reference, 8, ATOL, ATOL, 2e-5),
           "mamba2": (mamba2_reference, 8, ATOL, ATOL, 2e-5),
           "retnet": (retnet_reference, 12, 1e-5, 1e-4, 1e-4)}
ROW_STOCHASTIC = ("based",)  # its map: two normalised halves, every entry >= 0 (the others' are signed)
ROWS = [(variant, *case) for variant, cases in CASES.items() for case in cases]


@pytest.mark.parametrize("padded", [False, True], ids=["unpadded", "padded"])
@pytest.mark.parametrize(("variant", "heads", "t", "options"), ROWS, ids=[f"{v}-h{h}-t{t}-{o}" for v, h, t, o in ROWS])
def test_fast_path_weights_path_and_float64_reference_agree(variant, heads, t, options, padded):
    reference, d, map_atol, weights_path_atol, fast_atol = AGAINST[variant]
    torch.manual_seed(t)
    module = build_attention(variant, d_in=d, d_out=d, num_heads=heads, causal=True, qkv_bias=True, **options)
    module64 = copy.deepcopy(module).double()
    x = torch.randn(2, t, d)
    hidden = min(3, t - 1)
    padding = (torch.arange(t)[None, :] < torch.tensor([[0], [hidden]])) if padded else None  # left padding
    fast, none = module(x, key_padding_mask=padding)
    slow, weights = module(x, key_padding_mask=padding, need_weights=True)
    with torch.no_grad():
        expected, expected_weights = reference(module64, x.double(), padding)
    assert none is None and weights.shape == (2, heads, t, t)
    assert_close(weights, expected_weights, atol=map_atol)
    assert_close(slow, expected, atol=weights_path_atol)
    assert_close(fast, expected, atol=fast_atol)
    assert (weights.triu(1) == 0).all()  # nothing read from a later position
    if padded:
        assert (weights[1, :, :, :hidden] == 0).all()  # nor from a hidden one
    if variant in ROW_STOCHASTIC:
        assert (weights >= 0).all()
        rows = weights.sum(-1)[..., hidden:] if padded else weights.sum(-1)  # a query with no visible key reads nothing
        assert_close(rows, torch.ones_like(rows))


@pytest.mark.parametrize("variant", RECURRENCES)
def test_the_chunked_form_in_float64_equals_the_quadratic_form(variant):
    """T = 100 in chunks of 16 (not a multiple; based with a window of 8): the module's two paths agree to rounding."""
    torch.manual_seed(1)
    own = {"window_size": 8} if variant == "based" else {}
    module = build_attention(variant, d_in=8, d_out=8, num_heads=2, causal=True, chunk=16, **own).double()
    x = torch.randn(2, 100, 8, dtype=torch.float64)
    assert_close(module(x).context, module(x, need_weights=True).context, atol=1e-12)


@pytest.mark.parametrize("variant", RECURRENCES)
def test_a_mask_over_query_key_pairs_is_refused(variant):
    """A recurrence has no query-key pairs to mask: attend() takes key masks (B, 1, 1, T_k) only, and says so."""
    module = module_of(variant)
    groups = module.key_heads  # mamba2's C and B: one per group of heads
    q, v = torch.randn(1, groups, 5, module.head_dim), torch.randn(1, 2, 5, 4)
    gates = {"gated_deltanet": 2, "mamba2": 2 // groups}.get(variant, 0)  # the gates' pre-activations ride on the keys
    k = torch.randn(1, groups, 5, module.head_dim + gates)
    pairs = torch.ones(1, 1, 5, 5, dtype=torch.bool).tril()
    with pytest.raises(ValueError, match=rf"^'{variant}' takes key masks of shape \(B, 1, 1, T_k\), got \(1, 1, 5, 5\)$"):
        module.attend(q, k, v, pairs, False)
    module.attend(q, k, v, pairs[..., :1, :], False)  # one row: the keys' mask


@pytest.mark.parametrize("variant", RECURRENCES)
@pytest.mark.parametrize("t", [20, 150], ids=["quadratic", "chunked"])
@pytest.mark.parametrize("need_weights", [False, True], ids=["fast", "weights"])
def test_a_later_token_never_changes_an_earlier_output(variant, t, need_weights):
    module = module_of(variant)
    x = torch.randn(2, t, 8)
    before = module(x, need_weights=need_weights).context
    for changed in (0, t // 2, t - 1):
        y = x.clone()
        y[:, changed] += torch.randn(2, 8) * 10
        after = module(y, need_weights=need_weights).context
        assert_close(after[:, :changed], before[:, :changed])
        assert not torch.allclose(after[:, changed], before[:, changed])


@pytest.mark.parametrize("variant", RECURRENCES)
@pytest.mark.parametrize("t", [20, 150], ids=["quadratic", "chunked"])
def test_the_output_is_computed_through_the_map(variant, t):
    """capture() sees the map the weights path returns; an identity edit at hook_weights gives the fast path's
    output, a zero map silences every head (the output is out_proj's bias), and so does zeroing every head."""
    module = module_of(variant).double()
    x = torch.randn(2, t, 8, dtype=torch.float64)
    fast = module(x).context
    with capture(module) as cache:
        captured = module(x).context
    context, weights = module(x, need_weights=True)
    assert torch.equal(cache["hook_weights"], weights) and weights.shape == (2, 2, t, t)
    assert_close(captured, fast, atol=1e-10)
    with intervene(module, {"hook_weights": lambda w: w.clone()}):
        assert_close(module(x).context, fast, atol=1e-10)
    bias = module.out_proj.bias.expand_as(fast)
    with intervene(module, {"hook_weights": torch.zeros_like}):
        assert_close(module(x).context, bias)
    with intervene(module, {"hook_head_output": zero_heads([0, 1])}):
        assert_close(module(x).context, bias)
    with intervene(module, {"hook_weights": lambda w: w * torch.tensor([1.0, 0.0]).double()[:, None, None]}):
        one_head = module(x).context  # head 1 silenced through its map only
    with intervene(module, {"hook_head_output": zero_heads([1])}):
        assert_close(one_head, module(x).context)


@pytest.mark.parametrize("variant", RECURRENCES)
def test_unbatched_in_unbatched_out(variant):
    module = module_of(variant)
    x = torch.randn(3, 9, 8)
    batched, batched_weights = module(x, need_weights=True)
    context, weights = module(x[1], need_weights=True)
    assert context.shape == (9, 8) and weights.shape == (2, 9, 9)
    assert_close(context, batched[1])
    assert_close(weights, batched_weights[1])


@pytest.mark.parametrize("variant", RECURRENCES)
@pytest.mark.parametrize(("options", "argument"), [
    (dict(causal=False), "causal"),
    (dict(window=3), "window"),
    (dict(dropout=0.1), "dropout"),
    (dict(position="rope"), "position"),
    (dict(position="alibi"), "position"),
    (dict(kv_heads=1), "kv_heads"),
    (dict(d_v=4), "d_v"),
    (dict(d_out=6, num_heads=4), "num_heads"),
    (dict(chunk=0), "chunk"),
    (dict(chunk=True), "chunk"),
    (dict(chunk="64"), "chunk"),
    (dict(short_conv=-1), "short_conv"),
    (dict(short_conv=2.5), "short_conv"),
    (dict(short_conv=True), "short_conv"),
    (dict(normalize="sum"), "normalize"),
], ids=lambda v: v if isinstance(v, str) else "-".join(f"{k}={x}" for k, x in v.items()))
def test_what_does_not_apply_is_refused_naming_the_argument(variant, options, argument):
    with pytest.raises(AttentionArgumentError) as err:
        module_of(variant, **options)
    assert err.value.argument == argument and "\n" not in str(err.value)
    if argument == "causal":
        assert err.value.allowed == f"True for '{variant}'" and "recurrence" in err.value.reason


# position, window and a mask other than causal per variant: tests/attention/test_variant_configs.py's rows of each rule alone;
# model.dropout per variant that rejects it: tests/attention/test_variant_facts.py.
@pytest.mark.parametrize("variant", RECURRENCES)
@pytest.mark.parametrize(("overrides", "setting"), [
    (["mask=padding"], "mask=padding"),  # the line says what to use
    (["mask=causal", "kv_heads=2"], "kv_heads=2"),
])
def test_the_config_refuses_in_one_line(variant, overrides, setting):
    with pytest.raises(ConfigError) as err:
        validate(compose_config([f"model={variant}", "task=copy", *overrides]))
    message = str(err.value)
    assert message.startswith(f"{setting} is invalid for model={variant}") and "\n" not in message
    if setting.startswith("mask="):
        assert "use mask=causal" in message


BAD_OPTIONS = [  # (variant, an option in its yaml set to a value it refuses)
    *((variant, "chunk=0") for variant in RECURRENCES),
    *((variant, "short_conv=-2") for variant in RECURRENCES if variant != "retnet"),
    ("based", "feature_dim=0"),
    ("based", "window_size=-1"),
]


@pytest.mark.parametrize(("variant", "option"), BAD_OPTIONS, ids=[f"{v}-{o}" for v, o in BAD_OPTIONS])
def test_an_option_value_fails_before_the_run(variant, option):
    cfg = compose_config([f"model={variant}", "task=copy", "mask=causal", f"model.options.{option}", "device=cpu"])
    with pytest.raises(ConfigError, match=rf"^model\.options\.{option} is invalid for model={variant}: it must be "):
        check_run(cfg)


@pytest.mark.parametrize("variant", RECURRENCES)
def test_the_options_yaml_values_pass_the_same_checks(variant):
    check_run(compose_config([f"model={variant}", "task=copy", "mask=causal", "device=cpu"]))


@pytest.mark.parametrize("variant", RECURRENCES)
@pytest.mark.parametrize("need_weights", [False, True], ids=["fast", "weights"])
def test_every_parameter_gets_a_gradient(variant, need_weights):
    module = module_of(variant, qkv_bias=True, chunk=8)
    x = torch.randn(2, 20, 8, requires_grad=True)  # 20 positions: the chunked form on the fast path
    module(x, need_weights=need_weights).context.square().sum().backward()
    assert torch.isfinite(x.grad).all() and x.grad.abs().sum() > 0
    for name, parameter in module.named_parameters():
        assert parameter.grad is not None and torch.isfinite(parameter.grad).all(), name
        assert parameter.grad.abs().sum() > 0, name


@pytest.mark.parametrize("variant", RECURRENCES)
@pytest.mark.parametrize(("chunk", "padded", "need_weights"), [(64, False, False), (2, False, False),
                                                               (2, True, False), (64, True, True)],
                         ids=["quadratic", "chunked", "chunked-padded", "weights-padded"])
def test_gradcheck(variant, chunk, padded, need_weights):
    module = module_of(variant, d_in=4, d_out=4, qkv_bias=True, chunk=chunk, **SMALL[variant]).double()
    names = [name for name, _ in module.named_parameters()]
    params = [p.detach().clone().requires_grad_(True) for p in module.parameters()]
    x = torch.randn(2, 5, 4, dtype=torch.float64, requires_grad=True)
    padding = torch.tensor([[False] * 5, [True, False, False, False, False]]) if padded else None

    def run(x, *params):
        return functional_call(module, dict(zip(names, params, strict=True)), (x,),
                               dict(key_padding_mask=padding, need_weights=need_weights)).context

    assert gradcheck(run, (x, *params), eps=1e-6, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("variant", RECURRENCES)
def test_it_trains_on_induction_through_the_script(variant, tmp_path: Path, single_thread):
    run = tmp_path / "run"
    run_train(run, f"model={variant}", "task=induction", "mask=causal", "layers=2", "max_steps=8",
              "task.train_size=128", "task.val_size=32", "trainer.val_check_interval=4", "~callbacks.attention_maps",
              "~callbacks.head_score_maps", "ablation=[]")  # no images, no ablations: not looked at
    metrics = json.loads((run / "metrics.json").read_text())
    assert 0.0 <= metrics["val/seq_acc"] <= 1.0 and metrics["val/loss"] > 0
