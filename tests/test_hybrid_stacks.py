"""Hybrid stacks: ``mixers=[...]`` chooses one attention variant per layer. Its config errors (one line, naming
the layer), the blocks built, the per-layer maps, scores and ablations, and a short run through scripts/train.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf
from torch import nn

from attention_lab.analysis.ablation import ablate_heads
from attention_lab.attention import ATTENTION_REGISTRY
from attention_lab.attention.hooks import capture
from attention_lab.config import ModelConfig, typed
from attention_lab.errors import ConfigError
from attention_lab.model import SequenceModel
from conftest import check_command_line, compose_config, run_train

CAUSAL = ["mask=causal", "task=induction"]


def built(overrides: list[str], vocab: int = 12) -> SequenceModel:
    cfg = compose_config(overrides)
    torch.manual_seed(0)
    return SequenceModel(typed(ModelConfig, OmegaConf.to_container(cfg.model, resolve=True)), vocab)


@pytest.mark.parametrize(("overrides", "line"), [
    (["mixers=[gated_deltanet,multihead]", "layers=3", *CAUSAL],
     "mixers=[gated_deltanet,multihead] is invalid: it names 2 variants for layers=3"),
    (["mixers=[gated_deltanet,multihed]", *CAUSAL],
     "mixers[1]=multihed is invalid: it is not an attention variant; did you mean multihead?"),
    (["mixers=[multihead,multihead,mamba2]", "layers=3"],  # task reverse with the default mask=padding
     "mask=padding is invalid for mixers[2]=mamba2: use mask=causal"),
    (["mixers=[multihead,linear]", "window=3", *CAUSAL], "window=3 is invalid for mixers[1]=linear"),
    (["mixers=[multihead,cross]", *CAUSAL], "mixers[1]=cross is invalid: it attends to a second sequence"),
    (["mixers=[multihead,multihead]", "model=cross"], "is invalid for model=cross: an encoder-decoder's blocks"),
    (["mixers=[self,multihead]", *CAUSAL], "mixers[0]=self is invalid with heads=4: it has one head"),
    (["mixers=[simple,simple]", "ablation=[zero]", *CAUSAL],
     "ablation=[zero] is invalid for mixers=[simple,simple]: its attention has no weights of its own"),
    (["model.mixers=abc"], "model.mixers=abc is invalid: it must be a list of variant names"),
    (["mixers=[simple,multihead]", "heads=1", "optimized_metric=ablation/zero/loss/layer0/all", *CAUSAL],
     "optimized_metric=ablation/zero/loss/layer0/all is invalid"),  # layer 0 (simple) is not ablated
])
def test_a_bad_stack_is_one_line_naming_the_layer(overrides, line):
    with pytest.raises(ConfigError) as caught:
        check_command_line(overrides)
    assert line in str(caught.value) and "\n" not in str(caught.value)


def test_a_good_stack_passes_the_checks():
    check_command_line(["mixers=[gated_deltanet,gated_deltanet,gated_deltanet,multihead]", "layers=4", *CAUSAL])
    check_command_line(["mixers=[self,multihead]", "heads=1", *CAUSAL])  # one head in every layer
    check_command_line(["mixers=[simple,multihead]", "heads=1", "optimized_metric=ablation/zero/loss/layer1/all",
                        *CAUSAL])


def test_the_blocks_have_the_chosen_variants():
    model = built(["mixers=[gated_deltanet,mamba2,multihead]", "layers=3", "heads=2", *CAUSAL])
    assert [type(b.attention) for b in model.blocks] == [ATTENTION_REGISTRY[name]
                                                           for name in ("gated_deltanet", "mamba2", "multihead")]
    assert [b.attention.num_heads for b in model.blocks] == [2, 2, 2]
    without = built(["layers=3", "heads=2", *CAUSAL])  # no mixers: every layer is model's
    assert {type(b.attention) for b in without.blocks} == {ATTENTION_REGISTRY["multihead"]}


def test_the_variants_options_go_to_its_layers_only():
    model = built(["model=sigmoid", "+model.options.score_bias=-2.0", "mixers=[sigmoid,multihead]", *CAUSAL])
    sigmoid, multihead = (b.attention for b in model.blocks)
    assert sigmoid.score_bias == -2.0
    assert type(multihead) is ATTENTION_REGISTRY["multihead"]  # built without sigmoid's keyword


def test_each_layer_has_its_own_map_and_ablation():
    model = built(["mixers=[gated_deltanet,multihead]", "heads=2", *CAUSAL]).eval()
    tokens = torch.randint(1, 12, (3, 7))
    with capture(model, points=("weights",)) as cache:
        model(tokens)
    weights = cache.layers("weights")
    assert [w.shape for w in weights] == [(3, 2, 7, 7)] * 2
    assert torch.all(weights[1].sum(-1) - 1 < 1e-5)  # softmax rows sum to 1
    assert torch.all(weights[0].triu(1) == 0) and torch.all(weights[1].triu(1) == 0)  # both causal


class Wrapped(nn.Module):
    """What ablate_heads takes: a module with ``.model`` whose call gives the logits."""

    def __init__(self, model: SequenceModel) -> None:
        super().__init__()
        self.model = model

    def forward(self, tokens):
        return self.model(tokens)


def test_ablation_skips_a_layer_without_learned_heads():
    model = built(["mixers=[simple,multihead]", "heads=1", *CAUSAL])
    assert not model.blocks[0].attention.learned_heads
    batches = [(torch.randint(1, 12, (4, 6)), torch.randint(1, 12, (4, 6)))]
    results = ablate_heads(Wrapped(model), batches, ("zero",))
    assert sorted(results) == ["ablation/zero/loss/layer1/all", "ablation/zero/loss/layer1/head0",
                               "ablation/zero/token_acc/layer1/all", "ablation/zero/token_acc/layer1/head0"]


def test_a_stack_trains_through_the_script(tmp_path: Path, single_thread):
    run = tmp_path / "run"
    proc = run_train(run, "mixers=[gated_deltanet,multihead]", "layers=2", *CAUSAL, "max_steps=8",
                     "task.train_size=128", "task.val_size=32", "trainer.val_check_interval=4",
                     "callbacks.attention_maps.images=false")
    # The console says each layer's state, and which layers the circuit scores skip and why.
    console = proc.stdout + proc.stderr
    assert "KV cache per token: 96 numbers, in layer 1 (multihead); layer 0 (gated_deltanet) keeps a state of" \
        in console, console[-3000:]
    assert ("circuit scores: layer 0 (gated_deltanet) has no per-head W_Q/W_K/W_V/W_O of the multihead shape; "
            "measured layer 1") in console
    metrics = json.loads((run / "metrics.json").read_text())
    assert metrics["hparams"]["mixers"] == "gated_deltanet,multihead"
    assert 0.0 <= metrics["val/seq_acc"] <= 1.0
    for layer in (0, 1):  # scores and ablations of each layer, whatever its variant
        assert f"head_score/induction/layer{layer}/head3" in metrics
        assert f"ablation/zero/loss/layer{layer}/all" in metrics
    assert "circuit/copying/layer1/head3" in metrics and "circuit/copying/layer0/head0" not in metrics
    saved = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["hyper_parameters"]["model"]
    assert ModelConfig.from_dict(saved).layer_variants() == ["gated_deltanet", "multihead"]


def test_the_map_images_name_each_layers_variant():
    from test_attention_maps import FakeModule

    from attention_lab.callbacks.probe_logging import ProbeLogger

    module = FakeModule(encoder_decoder=False)
    module.config.mixers = ["gated_deltanet", "multihead"]
    titles = [title for _, title, _ in ProbeLogger(run_name="run").heatmaps(module, ["Life", "is"], 7)]
    assert titles[0].endswith("layer 0 (gated_deltanet), head 0 · step 7")
    assert titles[-1].endswith("layer 1 (multihead), head 3 · step 7")


def test_the_tabs_circuits_name_the_layer_without_them():
    from attention_lab.tensorboard_plugin.checkpoint_circuits import supported
    from attention_lab.tensorboard_plugin.sentence import SentenceError

    with pytest.raises(SentenceError, match=r"^layer 0 \(gated_deltanet\) has no per-head W_Q/W_K/W_V/W_O"):
        supported(Wrapped(built(["mixers=[gated_deltanet,multihead]", *CAUSAL])))
    with pytest.raises(SentenceError, match=r"^the mamba2 variant has no per-head"):
        supported(Wrapped(built(["model=mamba2", *CAUSAL])))
    supported(Wrapped(built(["model=multihead", *CAUSAL])))
