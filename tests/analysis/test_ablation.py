"""Head ablation: the names of per-head measurements, the ablation pass on a model, and the checks of its knobs."""

from __future__ import annotations

import math

import pytest
import torch

from attention_lab.analysis.ablation import ablate_heads, head_output_means, score
from attention_lab.analysis.head_scores import duplicate_token_score
from attention_lab.analysis.tags import (
    ABLATION_METRICS,
    ABLATIONS,
    FAMILIES,
    HeadMetric,
    grid,
    layer_values,
    tag,
)
from attention_lab.checks import validate
from conftest import compose_config


@pytest.mark.parametrize("family", FAMILIES)
def test_every_tag_reads_back_as_its_record(family):
    for head in (0, 11, None):
        if head is None and not family.startswith("ablation/"):
            continue
        assert HeadMetric.parse(tag(family, 3, head)) == HeadMetric(family, 3, head)


@pytest.mark.parametrize("name", ["val/loss", "head_score/nope/layer0/head0", "ablation/zero/loss/layer0/headx",
                                  "attention_entropy/layer0/all", "ablation/zero/loss/layerx/head0",
                                  "head_score/self/layer1/head2/extra"])
def test_other_names_are_not_per_head_measurements(name):
    assert HeadMetric.parse(name) is None


def test_grid_and_layer_values_split_heads_from_whole_layers():
    family = "ablation/zero/loss"
    metrics = {tag(family, 0, 0): 0.1, tag(family, 0, 1): 0.2, tag(family, 1, 1): 0.4, tag(family, 1, None): 0.9,
               "val/loss": 3.0}
    cells = grid(metrics, family)
    assert cells[0] == [0.1, 0.2] and math.isnan(cells[1][0]) and cells[1][1] == 0.4
    assert layer_values(metrics, family) == {1: 0.9}


def test_duplicate_token_score_by_hand():
    tokens = torch.tensor([[5, 6, 5, 7]])
    weights = torch.zeros(1, 2, 4, 4)
    weights[0, 0, 2, 0] = 1.0  # head 0: from the second 5 to the first 5
    weights[0, 1, 2, 1] = 1.0  # head 1: to the word after it (an induction head)
    scores = duplicate_token_score(weights, tokens, tokens != 0)
    assert scores.tolist() == [1.0, 0.0]


@pytest.fixture(scope="module")
def induction(trained_induction):
    torch.set_num_threads(1)
    return trained_induction


def test_ablation_measures_every_head_and_layer(induction):
    module, batches = induction
    results = ablate_heads(module, batches)
    heads = module.config.num_heads
    expected = {tag(f"ablation/{how}/{metric}", layer, head) for how in ABLATIONS for metric in ABLATION_METRICS
                for layer in range(2) for head in [*range(heads), None]}
    assert set(results) == expected
    assert all(math.isfinite(value) for value in results.values())
    for how in ABLATIONS:
        for metric in ABLATION_METRICS:
            for layer in range(2):
                single = max(results[tag(f"ablation/{how}/{metric}", layer, h)] for h in range(heads))
                whole = results[tag(f"ablation/{how}/{metric}", layer, None)]
                assert whole > single, (how, metric, layer, whole, single)
    base_loss, _ = score(module, batches)
    assert results[tag("ablation/zero/loss", 1, None)] > 0.5 * base_loss  # the circuit's second half is needed


def test_mean_ablation_replaces_a_head_by_its_average_output(induction):
    module, batches = induction
    means = head_output_means(module, batches)
    name = "blocks.0.attention.hook_head_output"
    inputs = torch.cat([b[0] for b in batches])
    from attention_lab.attention.hooks import capture

    with torch.no_grad(), capture(module.model, names=[name]) as cache:
        module(inputs)
    real = (inputs != 0).float()[:, None, :, None]
    expected = (cache[name] * real).sum(0, keepdim=True) / real.sum(0, keepdim=True).clamp_min(1)
    torch.testing.assert_close(means[name], expected, rtol=1e-5, atol=1e-6)


def test_ablation_leaves_the_module_as_it_was(induction):
    module, batches = induction
    module.train()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    ablate_heads(module, batches[:1], ("zero",))
    assert module.training
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())
    module.eval()


@pytest.mark.parametrize("metric", ["ablation/mean/token_acc/layer1/all", "ablation/zero/loss/layer0/head3",
                                    "head_score/duplicate_token/layer1/head0"])
def test_the_optimized_metric_may_be_a_per_head_measurement(metric):
    validate(compose_config([f"optimized_metric={metric}"]))


def test_an_unknown_ablation_is_refused_by_the_pass():
    with pytest.raises(ValueError, match="half"):
        ablate_heads(None, [], ("half",))


def test_an_encoder_decoder_ablates_its_decoder_heads():
    from hydra.utils import instantiate

    from attention_lab.data.corpus import Vocabulary, read_sentences

    cfg = compose_config(["model=cross", "task=copy"])
    module = instantiate(cfg.module, vocab=Vocabulary.from_sentences(read_sentences(None)).itos)
    inputs = torch.tensor([[2, 3, 4, 5], [6, 7, 8, 0]])
    results = ablate_heads(module, [(inputs, inputs)], ("zero",))
    # One cross-attention head per decoder block, and the whole block: the same head switched off, so the same cost.
    assert {HeadMetric.parse(name).layer for name in results} == set(range(cfg.model.layers))
    for layer in range(cfg.model.layers):
        assert results[tag("ablation/zero/loss", layer, 0)] == results[tag("ablation/zero/loss", layer, None)]


def test_the_callback_ablates_nothing_where_the_heads_have_no_weights():
    from types import SimpleNamespace

    from attention_lab.callbacks.head_ablation import HeadAblation

    logged = []
    module = SimpleNamespace(config=SimpleNamespace(learned_heads=False), log=lambda *args, **kwargs: logged.append(args))
    trainer = SimpleNamespace(sanity_checking=False, state=SimpleNamespace(fn="validate"), val_dataloaders=[[]])
    HeadAblation().on_validation_epoch_end(trainer, module)  # would fail on this stand-in if it ablated anything
    HeadAblation(hows=[]).on_validation_epoch_end(trainer, module)
    assert logged == []
