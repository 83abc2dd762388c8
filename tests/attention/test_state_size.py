"""The recurrent state a layer keeps (AttentionModule.state_size, in numbers): each variant declares its own, the
model reports the largest of its layers', and a run records it in metrics.json (Zoology's recall-memory axis)."""

from __future__ import annotations

import json

import pytest

from attention_lab.attention import ATTENTION_REGISTRY
from attention_lab.config import BlockConfig, ModelConfig
from attention_lab.model import SequenceModel
from attention_lab.review.lines import series
from attention_lab.review.sweep import collect_sweep
from conftest import run_train


@pytest.mark.parametrize(("name", "expected"), [
    ("multihead", 2 * 32 * 64),  # the KV cache: a key and a value of d numbers per token
    ("sigmoid", 2 * 32 * 64),  # attention without the softmax: the same cache
    ("linear", 4 * (16 * 16 + 16)),  # per head the sum of φ(k)ᵀv (d_k·d_v) and of φ(k) (the normaliser)
    ("conv", (32 + 2) * 64),  # the long filter's reach (32 values of d) and the short filter's two other taps
    ("retnet", 4 * 16 * 16),  # per head S = Σ γ^(n−m) kᵀv, d_h × d_h
    ("mamba2", 4 * 16 * 16 + 3 * (64 + 2 * 16)),  # per head d_h × d_h, 3 earlier inputs of X, B and C (one group)
    ("gated_deltanet", 4 * 16 * 16 + 3 * 3 * 64),  # per head d_h × d_h, and 3 earlier inputs of q, k and v
    ("based", 4 * 273 * 17 + 2 * 32 * 64 + 2 * 3 * 64),  # Taylor sums (1 + 16 + 256) × (d_h + 1), window, conv
    ("mla", 32 * 4 * 16),  # the latent cache: 4 · d_h numbers a token
])
def test_each_variant_declares_its_state(name, expected):
    assert ATTENTION_REGISTRY[name].state_size(64, 4, 32) == expected


def test_the_fixed_states_do_not_grow_with_the_sequence_and_the_caches_do():
    for name in ("linear", "retnet", "mamba2", "gated_deltanet"):
        assert ATTENTION_REGISTRY[name].state_size(64, 1, 1024) == ATTENTION_REGISTRY[name].state_size(64, 1, 8), name
    assert ATTENTION_REGISTRY["multihead"].state_size(64, 1, 1024) == 128 * ATTENTION_REGISTRY["multihead"].state_size(
        64, 1, 8)


@pytest.mark.parametrize("name", sorted(ATTENTION_REGISTRY))
def test_every_variant_has_a_positive_whole_state(name):
    size = ATTENTION_REGISTRY[name].state_size(64, 4, 32)
    assert isinstance(size, int) and size > 0


@pytest.mark.parametrize(("name", "expected"), [("linear", 2 * (16 * 16 + 16)), ("multihead", 2 * 20 * 32)])
def test_the_model_reports_its_layers_state(name, expected):
    config = ModelConfig(name=name, d_model=32, num_heads=2, layers=2, mask="causal", context_length=20,
                         block=BlockConfig(name="attention_only"))
    assert SequenceModel(config, vocab_size=30).state_size() == expected


def test_a_tiny_race_records_each_jobs_state_and_plots_against_it(tmp_path):
    sweep = tmp_path / "mqar"
    run_train(sweep, "experiment=mqar", "model=multihead,linear", "d_model=16", "lr=0.01", "seed=0",
              "hydra.sweeper.rungs=[3]", "hydra.sweeper.keep=[null]",  # the ladder's one rung: 3 steps
              "task.train_size=192", "task.val_size=64", "callbacks.attention_maps.images=false",
              "~callbacks.head_score_maps", multirun=True)
    recorded = {}
    for job in ("0", "1"):
        metrics = json.loads((sweep / job / "metrics.json").read_text())
        recorded[metrics["hparams"]["model"]] = metrics["state_size"]
    assert recorded == {"multihead": 2 * 32 * 16, "linear": 16 * 16 + 16}  # one head, context 32
    lines = series(collect_sweep(sweep), "state_size", "model", "val/token_acc", best="lr")
    assert {name: [p.x for p in points] for name, points in lines.items()} == {"multihead": [1024.0],
                                                                               "linear": [272.0]}


@pytest.mark.parametrize(("name", "options", "expected"), [
    ("based", {"window_size": 0}, 4 * 273 * 17 + 2 * (2 * 4 * 16 + 64)),  # the Taylor sums and the conv alone
    ("based", {"window_size": 4, "feature_dim": 8, "short_conv": 0}, 4 * 73 * 17 + 2 * 4 * 64),
    ("mla", {"kv_latent": 24}, 32 * 24),  # the latent cache: kv_latent numbers a token
    ("mamba2", {"short_conv": 0}, 4 * 16 * 16),
    ("mamba2", {"ngroups": 4}, 4 * 16 * 16 + 3 * 3 * 64),  # B and C per head: as wide as X
    ("mamba2", {"ngroups": 2, "short_conv": 2}, 4 * 16 * 16 + 1 * (64 + 2 * 2 * 16)),
    ("gated_deltanet", {"short_conv": 2}, 4 * 16 * 16 + 1 * 3 * 64),
])
def test_the_state_follows_the_variants_options(name, options, expected):
    assert ATTENTION_REGISTRY[name].state_size(64, 4, 32, **options) == expected


def test_grouped_keys_and_values_keep_a_smaller_cache():
    assert ATTENTION_REGISTRY["multihead"].state_size(64, 4, 32, kv_heads=1) == 2 * 32 * 16
    assert ATTENTION_REGISTRY["multihead"].state_size(64, 4, 32, kv_heads=4) == 2 * 32 * 64


@pytest.mark.parametrize(("model", "changes", "expected"), [
    ("based", {"options": {"window_size": 0}}, 1 * 273 * 17 + 2 * (2 * 16 + 16)),
    ("mla", {"options": {"kv_latent": 8}}, 32 * 8),
    ("multihead", {"num_heads": 4, "kv_heads": 2}, 2 * 32 * 2 * 4),
])
def test_a_model_reports_the_state_of_its_layers_as_built(model, changes, expected):
    config = ModelConfig(name=model, d_model=16, layers=2, context_length=32, mask="causal",
                         block=BlockConfig(name="attention_only"), **{"num_heads": 1, **changes})
    assert SequenceModel(config, vocab_size=30).state_size() == expected
