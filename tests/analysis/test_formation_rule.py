"""The formation rule (attention_lab.analysis.formation_rule, measured by analysis.formation_heads) on hand-built
heads: a previous-token head feeding an induction head meets it; heads that attend by position, also while leaving
out their own token, do not, on the rotated-repeat probe whose position-only bound is computed here two ways; nor
does the circuit with its previous-token head clamped to 0, nor one layer."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attention_lab.analysis.formation_heads import formed_heads, supply_removed
from attention_lab.analysis.formation_rule import THRESHOLD
from attention_lab.analysis.head_scores import PROBE_KINDS, head_scores
from attention_lab.analysis.prefix_matching import position_bound, prefix_probe, repeated_random_words
from attention_lab.attention.hooks import HookPoint, capture, intervene
from conftest import run_train

VOCAB = ["<pad>", "<unk>", *(str(i) for i in range(40))]  # the induction task's: 40 words
CONTEXT = 16  # the lab's context length
BIG = 30.0  # a score that takes (nearly) all the softmax


# --- hand-built heads: scores from the tokens and from what the layers below wrote -----------------------------------

class Head(nn.Module):
    """One head with the lab's hook points: ``scores(tokens, written)`` (B, T, T), causal; its output is the one-hot
    token of the keys it reads, (B, 1, T, V). ``weights=False``: no weights to capture, as a recurrence's layer."""

    def __init__(self, scores, weights: bool = True) -> None:
        super().__init__()
        self.scores = scores
        self.hook_weights, self.hook_head_output = HookPoint() if weights else nn.Identity(), HookPoint()

    def forward(self, tokens: Tensor, written: Tensor) -> Tensor:
        t = tokens.shape[1]
        scores = self.scores(tokens, written).masked_fill(~torch.ones(t, t, dtype=torch.bool).tril(), float("-inf"))
        weights = self.hook_weights(scores.softmax(-1)[:, None])  # (B, 1, T, T)
        return self.hook_head_output(weights @ F.one_hot(tokens, len(VOCAB)).float()[:, None])[:, 0]


class Block(nn.Module):
    def __init__(self, head: Head) -> None:
        super().__init__()
        self.attention = head


class HandBuilt(nn.Module):
    """Layers of one head each, every head's output added to what the later heads read (``blocks.<i>.attention``)."""

    def __init__(self, *heads: Head) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(head) for head in heads)

    def forward(self, tokens: Tensor) -> Tensor:
        written = torch.zeros(*tokens.shape, len(VOCAB))
        for block in self.blocks:
            written = written + block.attention(tokens, written)
        return written


def back(distance: int):
    """Position alone: each query reads the key ``distance`` back (position 0 where there is none)."""
    def scores(tokens: Tensor, written: Tensor) -> Tensor:
        t = tokens.shape[1]
        keys = (torch.arange(t) - distance).clamp_min(0)
        return BIG * F.one_hot(keys, t).float().expand(len(tokens), t, t)
    return scores


def matching_previous(tokens: Tensor, written: Tensor) -> Tensor:
    """The induction head: a key scores where what was written there (the previous token) is the query's token;
    position 0, which has no previous token (its previous-token head reads itself), never."""
    scores = BIG * torch.einsum("bqv,bkv->bqk", F.one_hot(tokens, len(VOCAB)).float(), written)
    return scores.index_fill(2, torch.tensor([0]), -BIG)


def own_token(tokens: Tensor) -> Tensor:
    """(B, T, T): True where the key holds the query's own token."""
    return tokens[:, :, None] == tokens[:, None, :]


def positions_avoiding_own(preference: Tensor):
    """Position alone, ``preference`` (T, T) its log-weights, with the keys holding the query's own token left out."""
    def scores(tokens: Tensor, written: Tensor) -> Tensor:
        return preference.expand(len(tokens), -1, -1).masked_fill(own_token(tokens) & ~torch.eye(
            tokens.shape[1], dtype=torch.bool), -1e4)
    return scores


def best_positional_pattern(probe) -> Tensor:
    """The pattern of the bound's proof: for each query position, weight 1 - e on the key after the commonest pair
    of adjacent earlier occurrences j, j + 1 and e on the key after that (log-weights, (T, T))."""
    t, e = probe.tokens.shape[1], 1e-4
    preference = torch.full((t, t), -1e4)
    counts: dict[int, dict[int, int]] = {}
    for _, query, earlier in probe.occurrences():
        counts.setdefault(query, {}).setdefault(earlier, 0)
        counts[query][earlier] += 1
    for query, by_key in counts.items():
        j = max(by_key, key=lambda k: by_key[k] + by_key.get(k + 1, 0))
        preference[query, j + 1] = torch.tensor(1 - e).log()
        if j + 2 <= query:
            preference[query, j + 2] = torch.tensor(e).log()
    return preference


def probe_score(model: nn.Module, probe: Tensor) -> list[float]:
    """Each layer's prefix matching on ``probe``, through the lab's own detector."""
    with capture(model, points=("weights",)) as cache:
        model(probe)
    return [float(head_scores(w, probe, probe != 0, PROBE_KINDS)["prefix_matching"]) for w in cache.layers("weights")]


# --- the probe and what position alone reaches on it -------------------------------------------------------------

def test_the_probe_rotates_each_repeat_and_balances_where_the_earlier_copy_stands():
    probe = prefix_probe(VOCAB, CONTEXT)
    assert torch.equal(probe.tokens, repeated_random_words(VOCAB, CONTEXT))  # built once, the same in every run
    assert int(probe.tokens.min()) >= 2  # no <pad>, <unk>
    for row, length, rotation in zip(probe.tokens.tolist(), probe.lengths, probe.rotations, strict=True):
        first = row[:length]
        assert row[length:2 * length] == first[rotation:] + first[:rotation]
        rest = first + row[2 * length:]
        assert len(set(rest)) == len(rest)  # every word once besides the repeat: one earlier occurrence per query
    offsets: dict[int, set[int]] = {}
    for _, query, earlier in probe.occurrences():
        offsets.setdefault(query, set()).add(query - earlier)
    assert all(len(found) >= 3 for query, found in offsets.items() if query >= 6)  # the offset varies at each position


def test_position_alone_reaches_the_bound_and_the_threshold_lies_above_it():
    probe = prefix_probe(VOCAB, CONTEXT)
    bound = position_bound(probe)
    assert bound == pytest.approx(0.3317, abs=1e-4) and position_bound(probe, avoid_own_token=False) < bound
    assert THRESHOLD >= bound + 0.05
    # The proof's pattern, run through the lab's detector, reaches it: the bound is tight.
    best = HandBuilt(Head(positions_avoiding_own(best_positional_pattern(probe))))
    assert probe_score(best, probe.tokens)[0] == pytest.approx(bound, abs=1e-3)
    # No random position-only pattern, its own token left out or not, passes it.
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        preference = 3 * torch.randn(CONTEXT, CONTEXT, generator=generator)
        plain = HandBuilt(Head(lambda tokens, written, p=preference: p.expand(len(tokens), -1, -1)))
        avoiding = HandBuilt(Head(positions_avoiding_own(preference)))
        assert max(probe_score(plain, probe.tokens) + probe_score(avoiding, probe.tokens)) <= bound + 1e-6


@pytest.mark.parametrize("distance", [7, 3])
def test_a_head_that_attends_a_fixed_distance_back_scores_low_on_the_probe(distance):
    """On a probe whose repeats all stood 8 words back, the head 7 back scored 1.0 without reading a word."""
    probe = repeated_random_words(VOCAB, CONTEXT)
    [score] = probe_score(HandBuilt(Head(back(distance))), probe)
    assert score < position_bound(prefix_probe(VOCAB, CONTEXT)) < THRESHOLD


# --- the rule on hand-built models ---------------------------------------------------------------------------------

def circuit() -> HandBuilt:
    """A previous-token head in layer 0, an induction head reading what it wrote in layer 1."""
    return HandBuilt(Head(back(1)), Head(matching_previous))


def test_a_hand_built_induction_circuit_meets_the_rule():
    [(layer, head, score, without)] = formed_heads(circuit(), repeated_random_words(VOCAB, CONTEXT), THRESHOLD)
    assert (layer, head) == (1, 0) and score > 0.95 and without < 0.3


def test_layers_keep_their_numbers_when_a_layer_below_shows_no_weights():
    model = HandBuilt(Head(back(1), weights=False), Head(matching_previous))
    [(layer, head, _, without)] = formed_heads(model, repeated_random_words(VOCAB, CONTEXT), THRESHOLD)
    assert (layer, head) == (1, 0) and without < 0.3


def test_heads_that_attend_by_position_do_not_meet_it():
    probe = prefix_probe(VOCAB, CONTEXT)
    avoiding = positions_avoiding_own(best_positional_pattern(probe))
    for model in (HandBuilt(Head(back(1)), Head(back(7))),  # a previous-token head below a positional one
                  HandBuilt(Head(avoiding)),  # one layer: the best position can do, its own token left out
                  HandBuilt(Head(back(1)), Head(avoiding))):
        assert formed_heads(model, probe.tokens, THRESHOLD) == []


def test_the_circuit_with_its_previous_token_head_clamped_does_not_meet_it():
    model = circuit()
    with intervene(model, {"blocks.0.attention.hook_head_output": torch.zeros_like}):  # the clamp, for this test
        assert formed_heads(model, repeated_random_words(VOCAB, CONTEXT), THRESHOLD) == []


def test_a_head_that_matches_its_own_keys_without_a_supply_never_counts():
    """A layer-0 head scoring high with nothing below it to remove keeps its score: the rule asks that it fall. (A
    plain layer-0 head cannot score so; a hand-built one reading the true previous token can.)"""
    def oracle(tokens: Tensor, written: Tensor) -> Tensor:
        previous = F.one_hot(F.pad(tokens, (1, 0))[:, :-1], len(VOCAB)).float()
        return matching_previous(tokens, previous)
    probe = repeated_random_words(VOCAB, CONTEXT)
    assert probe_score(HandBuilt(Head(oracle)), probe)[0] > 0.95
    assert formed_heads(HandBuilt(Head(oracle)), probe, THRESHOLD) == []


def test_smeared_keys_are_part_of_the_supply_removed():
    """With the supply removed, a smeared-keys layer attends as the same layer whose share of its own key is 1."""
    from omegaconf import OmegaConf

    from attention_lab.config import ModelConfig, typed
    from attention_lab.model import SequenceModel
    from conftest import compose_config

    cfg = compose_config(["mask=causal", "task=induction", "layers=2", "smeared_keys=true", "d_model=16"])
    torch.manual_seed(0)
    model = SequenceModel(typed(ModelConfig, OmegaConf.to_container(cfg.model, resolve=True)), len(VOCAB)).eval()
    probe = repeated_random_words(VOCAB, CONTEXT)
    with torch.no_grad(), supply_removed(model, 1), capture(model, points=("weights",)) as removed:
        model(probe)
    with torch.no_grad(), capture(model, points=("weights",)) as smeared:
        model(probe)
    with torch.no_grad():
        for block in model.blocks:
            block.attention.smeared_keys.alpha.fill_(50.0)  # sigmoid(50) = 1 in float32: the plain key
    with torch.no_grad(), intervene(model, {"blocks.0.attention.hook_head_output": torch.zeros_like}), \
            capture(model, points=("weights",)) as plain:
        model(probe)
    for layer in (0, 1):
        assert torch.allclose(removed.layers("weights")[layer], plain.layers("weights")[layer], atol=1e-6)
        assert not torch.allclose(smeared.layers("weights")[layer], plain.layers("weights")[layer], atol=1e-3)


# --- trained runs: one layer, and two with layer 0 clamped -----------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("overrides", [["layers=1"], ["layers=2", "clamp=[layer0/head*]"]],
                         ids=["one layer", "layer 0 clamped"])
def test_a_trained_run_without_the_circuit_records_no_formation(tmp_path, overrides):
    """400 steps of experiment=induction_formation, seed 0. The clamped run's layer-1 detector score on the task
    passes 0.5 (at step 340), which the rule before this one counted as a formation."""
    run_train(tmp_path / "run", "experiment=induction_formation", "seed=0", *overrides, "threads=1",
              "callbacks.attention_maps.images=false", "~callbacks.head_score_maps", "ablation=[zero]")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    history = metrics["formation"]
    assert metrics["formation_step"] is None and not any(history["formed"])
    assert max(history["prefix_matching"]) < position_bound(prefix_probe(VOCAB, CONTEXT)) < THRESHOLD
    if "layers=2" in overrides:
        assert max(layers[1] for layers in history["induction_by_layer"]) >= 0.5
