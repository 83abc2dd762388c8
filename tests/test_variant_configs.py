"""The variant knobs (position, window, kv_heads) over every model and mask: each combination either builds a
model that runs, or is rejected with one line naming the setting, before any run dir exists. The variant
yamls' declarations agree with the attention classes they name."""

from __future__ import annotations

import itertools

import hydra
import pytest
import torch

from attention_lab.attention import ATTENTION_REGISTRY
from attention_lab.attention.hooks import capture
from attention_lab.checks import caveats, validate
from attention_lab.config import Mask, Position
from attention_lab.data.corpus import PAD_ID
from attention_lab.errors import ConfigError
from conftest import CONFIG_DIR, compose_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny forward passes run on one thread

MODELS = sorted(p.stem for p in (CONFIG_DIR / "model").glob("*.yaml"))
POSITIONS = [p.value for p in Position]
MASKS = [m.value for m in Mask]
WINDOWS = [None, 2]
VOCAB = ["<pad>", "<unk>", *"abcdefgh"]


def expected_rejection(model: str, position: str, mask: str, window: int | None = None) -> str | None:
    """The setting each rule names (independent of the checks' code: written from the variants' nature)."""
    recurrences = ("mamba2", "gated_deltanet", "retnet", "based")
    if model in ("simple", "cross", "linear", "conv", *recurrences) and position in ("rope", "alibi"):
        return f"position={position}"  # simple has no projections; cross's queries and keys are two sequences;
        # linear attention and the recurrences form no scores; a convolution has no queries and keys
    if model in ("linear", "conv", *recurrences) and window:
        return f"window={window}"  # linear attention sums over every key; the filter is as long as the sequence;
        # a recurrence's state carries every earlier position (based's own window is model.options.window_size)
    if model == "cross" and mask == "causal":
        return "mask=causal"
    if model in recurrences and mask != "causal":
        return f"mask={mask}"  # a state that each position updates is read by the later positions only
    return None


COMBINATIONS = list(itertools.product(MODELS, POSITIONS, MASKS, WINDOWS))


def overrides(model: str, position: str, mask: str, window: int | None) -> list[str]:
    return [f"model={model}", f"position={position}", f"mask={mask}", f"window={window if window else 'null'}",
            "task=copy"]


@pytest.mark.parametrize(("model", "position", "mask", "window"), COMBINATIONS,
                         ids=[f"{m}-{p}-{k}-w{w}" for m, p, k, w in COMBINATIONS])
def test_every_combination_builds_or_is_rejected_naming_the_setting(model, position, mask, window):
    cfg = compose_config(overrides(model, position, mask, window))
    rejected = expected_rejection(model, position, mask, window)
    if rejected:
        with pytest.raises(ConfigError) as err:
            validate(cfg)
        assert rejected in str(err.value) and "\n" not in str(err.value)
        return
    validate(cfg)
    module = hydra.utils.instantiate(cfg.module, vocab=VOCAB)
    tokens = torch.tensor([[2, 3, 4, 5, 6], [7, 8, 9, PAD_ID, PAD_ID]])
    with capture(module.model, points=("weights",)) as cache:
        logits = module(tokens)
    weights = cache.layers("weights")
    assert logits.shape == (2, 5, len(VOCAB)) and torch.isfinite(logits).all()
    heads = cfg.model.num_heads if ATTENTION_REGISTRY[model].multi_head else 1
    assert [tuple(w.shape) for w in weights] == [(2, heads, 5, 5)] * cfg.layers
    distance = torch.arange(5)[:, None] - torch.arange(5)[None, :]  # i - j
    for w in weights:
        if mask == "causal":
            assert w[..., distance < 0].abs().max() == 0
        if window and model != "cross":  # cross: queries are output slots, keys the encoded input
            assert w[..., distance.abs() >= window].abs().max() == 0
    no_position = Position(position) is Position.none and Mask(mask) is not Mask.causal
    assert bool(caveats(cfg)) == no_position  # NoPE without a causal mask runs, with a warning


@pytest.mark.parametrize(("extra", "setting"), [
    (["kv_heads=3"], "kv_heads=3"),                    # does not divide heads=4
    (["kv_heads=0"], "kv_heads=0"),
    (["model=self", "kv_heads=1"], "kv_heads=1"),      # single-head variants have no heads to group
    (["model=multihead_concat", "kv_heads=2"], "kv_heads=2"),
    (["window=0"], "window=0"),
    (["position=rope", "heads=16"], "position=rope"),  # head_dim 3: rotations need pairs
])
def test_bad_variant_knobs_are_rejected(extra, setting):
    with pytest.raises(ConfigError) as err:
        validate(compose_config(extra))
    assert setting in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_grouped_kv_heads_shrink_the_key_value_projections(kv_heads):
    module = hydra.utils.instantiate(compose_config([f"kv_heads={kv_heads}"]).module, vocab=VOCAB)
    attention = module.model.blocks[0].attention
    head_dim = 48 // 4
    assert attention.W_key.weight.shape == (kv_heads * head_dim, 48)
    assert attention.W_value.weight.shape == (kv_heads * head_dim, 48)


def test_positions_that_act_on_embeddings():
    learned = hydra.utils.instantiate(compose_config(["position=learned"]).module, vocab=VOCAB).model
    sinusoidal = hydra.utils.instantiate(compose_config(["position=sinusoidal"]).module, vocab=VOCAB).model
    inside = hydra.utils.instantiate(compose_config(["position=rope"]).module, vocab=VOCAB).model
    assert learned.position_embedding is not None and learned.position_table is None
    table = sinusoidal.position_table
    assert sinusoidal.position_embedding is None and not table.requires_grad
    # Vaswani et al.: PE[t, 2i] = sin(t / 10000^(2i/d)), PE[t, 2i+1] = cos(...)
    t, i, d = 5, 3, 48
    assert table[t, 2 * i].item() == pytest.approx(torch.sin(torch.tensor(t / 10000 ** (2 * i / d))).item(), abs=1e-6)
    assert table[t, 2 * i + 1].item() == pytest.approx(torch.cos(torch.tensor(t / 10000 ** (2 * i / d))).item(), abs=1e-6)
    assert inside.position_embedding is None and inside.position_table is None
