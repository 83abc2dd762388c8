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


def broken_rules(model: str, position: str, mask: str, window: int | None = None) -> list[str]:
    """The settings a combination breaks a rule of, in the order the checks apply the rules (position, window,
    mask), from what the variant's class declares; the first is the one its one line names."""
    facts = ATTENTION_REGISTRY[model]
    broken = []
    if position in ("rope", "alibi") and (not facts.projects or facts.takes_source):
        broken.append(f"position={position}")  # they act on a query-key score: no projections (simple, linear
        # attention, the recurrences, a convolution) or queries and keys of two sequences (cross)
    if window and "window" in facts.rejects:
        broken.append(f"window={window}")  # linear attention sums over every key; the filter is as long as the
        # sequence; a recurrence's state carries every earlier position (based's own window is model.options.window_size)
    if mask == "causal" and facts.takes_source:
        broken.append("mask=causal")  # the keys are another sequence: no position to compare
    if mask != "causal" and facts.causal_only:
        broken.append(f"mask={mask}")  # a state that each position updates is read by the later positions only
    return broken


def expected_rejection(model: str, position: str, mask: str, window: int | None = None) -> str | None:
    broken = broken_rules(model, position, mask, window)
    return broken[0] if broken else None


def rows() -> tuple[list[tuple[str, str, str, int | None]], list[tuple[str, str, str, int | None]]]:
    """One row per distinct rule or code path, not the whole product (model x position x mask x window).
    Accepted: each variant with each position, each mask and each window it takes (their forward passes), in as
    many rows as the longest of those lists, the values taking turns (offset per variant, so that the pairs of
    values differ from one variant to the next). Rejected: each rule a variant breaks, alone, and, where it breaks
    several, all of them at once (the first is named); the values a rule does not branch on take turns."""
    accepted, rejected = [], []
    for offset, model in enumerate(MODELS):
        product = list(itertools.product([model], POSITIONS, MASKS, WINDOWS))
        takes = [[v for v in values if any(c[k] == v and not broken_rules(*c) for c in product)]
                 for k, values in ((1, POSITIONS), (2, MASKS), (3, WINDOWS))]
        for n in range(max(map(len, takes))):
            accepted.append((model, *(values[(n + offset) % len(values)] for values in takes)))
        groups: dict[tuple[str, ...], list] = {}
        for c in product:
            rules = tuple(setting.split("=")[0] for setting in broken_rules(*c))
            groups.setdefault(rules, []).append(c)
        most = max(map(len, groups))
        for n, (rules, group) in enumerate(groups.items()):
            if len(rules) == 1 or (len(rules) == most > 1):
                rejected.append(group[(n + offset) % len(group)])
    return accepted, rejected


ACCEPTED, REJECTED = rows()
ROWS = ACCEPTED + REJECTED


def overrides(model: str, position: str, mask: str, window: int | None) -> list[str]:
    return [f"model={model}", f"position={position}", f"mask={mask}", f"window={window if window else 'null'}",
            "task=copy"]


def test_the_rows_cover_every_value_each_variant_takes_and_every_rule_it_has():
    for model in MODELS:
        product = list(itertools.product([model], POSITIONS, MASKS, WINDOWS))
        rows_of = [c for c in ACCEPTED if c[0] == model]
        assert rows_of and all(not broken_rules(*c) for c in rows_of), model
        for k in (1, 2, 3):  # each position, mask and window the variant takes is in one of its accepted rows
            assert {c[k] for c in rows_of} == {c[k] for c in product if not broken_rules(*c)}, (model, k)
        every_rule = {setting.split("=")[0] for c in product for setting in broken_rules(*c)}
        alone = {broken_rules(*c)[0].split("=")[0] for c in REJECTED if c[0] == model and len(broken_rules(*c)) == 1}
        assert alone == every_rule, model
    facts = [ATTENTION_REGISTRY[model] for model in MODELS]  # each rule has a variant that breaks it
    assert any(f.causal_only for f in facts) and any(f.takes_source for f in facts)
    assert any("window" in f.rejects for f in facts) and any(not f.projects for f in facts)


@pytest.mark.parametrize(("model", "position", "mask", "window"), ROWS,
                         ids=[f"{m}-{p}-{k}-w{w}" for m, p, k, w in ROWS])
def test_every_combination_builds_or_is_rejected_naming_the_setting(model, position, mask, window):
    cfg = compose_config(overrides(model, position, mask, window))
    rejected = expected_rejection(model, position, mask, window)
    if rejected:
        with pytest.raises(ConfigError) as err:
            validate(cfg)
        assert str(err.value).startswith(f"{rejected} is invalid for model={model}: "), str(err.value)
        assert "\n" not in str(err.value)
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
        if mask == "padding":  # no query attends to <pad>
            assert w[1, :, :, 3:].abs().max() == 0
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
