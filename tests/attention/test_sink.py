"""multihead's option `sink` (softmax off by one, a learned sink logit), task.bos and the head score first_token:
float64 references written from the equations, the fused path against the explicit one, causality, hooks and
config rejection."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from test_attention_reference import assert_close

from attention_lab.analysis.head_scores import head_scores
from attention_lab.attention import AttentionArgumentError, build_attention
from attention_lab.attention.hooks import capture, intervene, zero_heads
from attention_lab.attention.linear import LinearAttention
from attention_lab.checks import validate
from attention_lab.config import TaskConfig, typed
from attention_lab.data.corpus import BOS, BOS_ID, PAD_ID, Vocabulary, read_sentences
from attention_lab.data.datamodule import SentenceTaskDataModule
from attention_lab.data.probe import with_first_token
from attention_lab.data.tasks import TASK_REGISTRY, build_task
from attention_lab.errors import ConfigError
from conftest import compose_config, run_train

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def module_of(sink: str, **kwargs) -> torch.nn.Module:
    torch.manual_seed(0)
    module = build_attention("multihead", d_in=8, d_out=8, num_heads=2, sink=sink, **kwargs).double()
    if sink == "learned":
        with torch.no_grad():
            module.sink_logit.copy_(torch.tensor([1.5, -0.7]))  # away from 0, so `learned` differs from `zero`
    return module


@torch.no_grad()
def reference_sink(module, x, causal: bool, padding=None):
    """Output and weights from the equations, one query and one head at a time:
    w_ij = exp(s_ij) / (exp(b_h) + Σ_{j' allowed} exp(s_ij')), s_ij = q_i·k_j/√d, out_i = Σ_j w_ij v_j, b_h = 0 for
    `zero` (softmax off by one: one more logit, 0), the learned logit for `learned`; W_query, W_key, W_value then
    out_proj as multihead's."""
    b, t, _ = x.shape
    h, d = module.num_heads, module.head_dim
    groups = h // module.kv_heads
    q = module.W_query(x).view(b, t, h, d)
    k = module.W_key(x).view(b, t, module.kv_heads, d)
    v = module.W_value(x).view(b, t, module.kv_heads, d)
    out = torch.zeros(b, t, h, d, dtype=torch.float64)
    weights = torch.zeros(b, h, t, t, dtype=torch.float64)
    for batch in range(b):
        for head in range(h):
            sink = float(module.sink_logit[head])
            for i in range(t):
                keys = [j for j in range(t) if (not causal or j <= i) and (padding is None or not padding[batch, j])]
                logits = {j: float(q[batch, i, head] @ k[batch, j, head // groups]) / math.sqrt(d) for j in keys}
                normaliser = math.exp(sink) + sum(math.exp(s) for s in logits.values())
                for j, s in logits.items():
                    weights[batch, head, i, j] = math.exp(s) / normaliser
                    out[batch, i, head] += weights[batch, head, i, j] * v[batch, j, head // groups]
    return module.out_proj(out.reshape(b, t, h * d)), weights


@pytest.mark.parametrize("sink", ["zero", "learned"])
@pytest.mark.parametrize("causal", [True, False])
@pytest.mark.parametrize("kv_heads", [None, 1])
@pytest.mark.parametrize("padded", [False, True])
def test_both_paths_match_the_float64_reference(sink, causal, kv_heads, padded):
    module = module_of(sink, causal=causal, kv_heads=kv_heads)
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    padding = torch.tensor([[False] * 6, [False] * 4 + [True] * 2]) if padded else None
    expected, expected_weights = reference_sink(module, x, causal, padding)
    assert_close(module(x, key_padding_mask=padding).context, expected, atol=1e-10)  # fused: SDPA, one more key
    context, weights = module(x, key_padding_mask=padding, need_weights=True)
    assert_close(context, expected, atol=1e-10)
    assert_close(weights, expected_weights, atol=1e-12)
    assert (weights.sum(-1) < 1).all()  # the sink's share is what each row is missing


def test_a_zero_sink_is_one_more_logit_of_zero_and_none_keeps_plain_softmax():
    """softmax off by one of the T x T scores equals softmax over the scores with a 0 column, that column dropped."""
    x = torch.randn(1, 5, 8, dtype=torch.float64)
    plain, zero = module_of("none", causal=True), module_of("zero", causal=True)
    with capture(plain) as cache:
        plain(x, need_weights=True)
    scores = cache["hook_scores"]  # (1, H, T, T), -inf above the diagonal
    padded = torch.cat([scores, torch.zeros(*scores.shape[:-1], 1, dtype=scores.dtype)], dim=-1)
    assert_close(zero(x, need_weights=True).weights, torch.softmax(padded, dim=-1)[..., :-1], atol=1e-12)
    assert_close(plain(x, need_weights=True).weights.sum(-1), torch.ones(1, 2, 5, dtype=torch.float64), atol=1e-12)


def test_the_learned_sink_logit_is_learned_and_starts_as_the_zero_sink():
    torch.manual_seed(0)
    learned = build_attention("multihead", d_in=8, d_out=8, num_heads=2, sink="learned", causal=True)
    torch.manual_seed(0)
    zero = build_attention("multihead", d_in=8, d_out=8, num_heads=2, sink="zero", causal=True)
    x = torch.randn(2, 5, 8)
    assert_close(learned(x).context, zero(x).context, atol=1e-6)  # float32; the kernels may differ with grads
    learned(x).context.sum().backward()
    assert learned.sink_logit.grad is not None and learned.sink_logit.grad.abs().sum() > 0
    assert "sink_logit" not in zero.state_dict()  # `zero` has nothing to learn or save


@pytest.mark.parametrize("sink", ["zero", "learned"])
@pytest.mark.parametrize("need_weights", [False, True])
def test_a_future_token_changes_no_earlier_output(sink, need_weights):
    module = module_of(sink, causal=True)
    x = torch.randn(1, 6, 8, dtype=torch.float64)
    changed = x.clone()
    changed[:, 4] += 1.0
    before, after = module(x, need_weights=need_weights).context, module(changed, need_weights=need_weights).context
    assert torch.equal(before[:, :4], after[:, :4]) and not torch.allclose(before[:, 4:], after[:, 4:])


@pytest.mark.parametrize("sink", ["zero", "learned"])
def test_the_output_is_computed_through_the_map(sink):
    module = module_of(sink, causal=True)
    x = torch.randn(2, 6, 8, dtype=torch.float64)
    fast = module(x).context
    with capture(module) as cache:
        captured = module(x).context
    assert torch.equal(cache["hook_weights"], module(x, need_weights=True).weights)
    assert cache["hook_weights"].shape == (2, 2, 6, 6)  # T x T: the sink's column is not in the map
    assert_close(captured, fast, atol=1e-12)
    with intervene(module, {"hook_weights": lambda w: w.clone()}):
        assert_close(module(x).context, fast, atol=1e-12)
    bias = module.out_proj.bias.expand_as(fast)
    with intervene(module, {"hook_weights": torch.zeros_like}):
        assert_close(module(x).context, bias)
    with intervene(module, {"hook_head_output": zero_heads([0, 1])}):
        assert_close(module(x).context, bias)


def test_a_query_with_every_key_hidden_gives_everything_to_the_sink():
    module = module_of("learned")
    x = torch.randn(1, 4, 8, dtype=torch.float64)
    every_key = torch.ones(1, 4, dtype=torch.bool)
    bias = module.out_proj.bias.expand(1, 4, 8)
    assert_close(module(x, key_padding_mask=every_key).context, bias)
    context, weights = module(x, key_padding_mask=every_key, need_weights=True)
    assert_close(context, bias) and not weights.isnan().any()


@pytest.mark.parametrize("options", [{"sink": "bogus"}, {"sink": None}])
def test_a_bad_sink_is_rejected(options):
    with pytest.raises(AttentionArgumentError) as err:
        build_attention("multihead", d_in=8, d_out=8, num_heads=2, **options)
    assert err.value.argument == "sink" and "zero" in err.value.allowed


def test_a_variant_with_its_own_weights_refuses_a_sink():
    with pytest.raises(AttentionArgumentError) as err:  # not among linear's options: the config checks say so
        build_attention("linear", d_in=8, d_out=8, num_heads=2, sink="zero")
    assert err.value.argument == "sink"
    with pytest.raises(AttentionArgumentError) as err:  # a subclass overriding attend, built directly
        LinearAttention(8, 8, num_heads=2, sink="zero")
    assert err.value.argument == "sink" and "own weights" in err.value.reason


@pytest.mark.parametrize(("extra", "setting"), [
    (["+model.options.sink=bogus"], "model.options.sink=bogus"),
    (["model=linear", "+model.options.sink=zero"], "model.options.sink=zero"),
    (["model=sigmoid", "+model.options.sink=learned"], "model.options.sink=learned"),
    (["task.bos=true"], "task.max_len=8"),  # <bos> makes 9 positions, one more than the table's 8
])
def test_bad_settings_are_one_line(extra, setting):
    with pytest.raises(ConfigError) as err:
        validate(compose_config([*extra, "model.context_length=8"]))
    assert setting in str(err.value) and "\n" not in str(err.value)


def test_first_token_score_on_a_hand_built_map():
    weights = torch.zeros(1, 2, 3, 3)
    weights[0, 0, :, 0] = torch.tensor([1.0, 0.5, 0.25])  # head 0: 1, 0.5 and 0.25 to position 0
    weights[0, 1, :, 0] = torch.tensor([1.0, 0.0, 0.0])  # head 1: only position 0 itself does
    weights[0, 1, 1, 1] = weights[0, 1, 2, 2] = 1.0
    real = torch.tensor([[True, True, False]])  # the padded query does not count
    scores = head_scores(weights, torch.tensor([[2, 5, 0]]), real)
    assert_close(scores["first_token"], torch.tensor([0.75, 0.5]))


@pytest.mark.parametrize("task", sorted(TASK_REGISTRY))
def test_bos_starts_every_input_and_its_target_is_ignored(task):
    def data(bos: str) -> SentenceTaskDataModule:
        cfg = compose_config([f"task={task}", "task.train_size=40", "task.val_size=10", f"task.bos={bos}"])
        module = SentenceTaskDataModule(typed(TaskConfig, OmegaConf.to_container(cfg.task, resolve=True)))
        module.setup()
        return module

    plain, with_bos = data("false"), data("true")
    assert with_bos.vocab.itos[BOS_ID] == BOS and BOS not in plain.vocab.itos
    assert with_bos.vocab.words == plain.vocab.words  # the same words, each one id later
    (inputs, targets), (bos_inputs, bos_targets) = plain.train_set.tensors, with_bos.train_set.tensors
    assert bos_inputs.shape == (40, plain.task.max_len + 1) and inputs.shape == (40, plain.task.max_len)
    assert (bos_inputs[:, 0] == BOS_ID).all() and (bos_targets[:, 0] == PAD_ID).all()

    def later(ids):  # a word's id with <bos> in the vocabulary: one more
        return torch.where(ids >= BOS_ID, ids + 1, ids)

    assert torch.equal(bos_inputs[:, 1:], later(inputs)) and torch.equal(bos_targets[:, 1:], later(targets))


def test_the_probe_starts_with_bos_when_the_inputs_do():
    sentences = read_sentences()
    vocab = Vocabulary.for_task(sentences, bos=True)
    words = build_task("induction").probe(vocab, sentences, TaskConfig(name="induction"))
    assert with_first_token(words, vocab.itos) == [BOS, *words]
    assert with_first_token([BOS, *words], vocab.itos) == [BOS, *words]  # once
    assert with_first_token(words, Vocabulary.for_task(sentences).itos) == words


def test_it_trains_with_a_learned_sink_and_bos_through_the_script(tmp_path: Path, single_thread):
    run = tmp_path / "run"
    run_train(run, "+model.options.sink=learned", "task=induction", "mask=causal", "layers=2", "task.bos=true",
              "model.context_length=17", "max_steps=8", "task.train_size=128", "task.val_size=32",
              "trainer.val_check_interval=4", "callbacks.attention_maps.images=false",
              "ablation=[]")  # no ablations: not looked at
    metrics = json.loads((run / "metrics.json").read_text())
    assert 0.0 <= metrics["val/seq_acc"] <= 1.0 and metrics["val/loss"] > 0
    assert 0.0 <= metrics["head_score/first_token/layer0/head0"] <= 1.0



def test_the_causal_kernel_path_has_the_gradients_of_the_equations():
    """Causal, no padding: the sink as key 0 through is_causal; its gradients (the sink logit's too) checked."""
    module = module_of("learned", causal=True, kv_heads=1)
    x = torch.randn(2, 5, 8, dtype=torch.float64, requires_grad=True)
    logit = module.sink_logit.detach().clone().requires_grad_(True)

    def run(x, logit):
        return torch.func.functional_call(module, {"sink_logit": logit}, (x,)).context

    assert torch.autograd.gradcheck(run, (x, logit), eps=1e-6, atol=1e-5, rtol=1e-4)
