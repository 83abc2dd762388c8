"""Which heads of a model meet the formation rule (:mod:`attention_lab.analysis.formation_rule`), measured: each
head's prefix-matching score on the rotated-repeat probe (:mod:`attention_lab.analysis.prefix_matching`), and the
same score once what could have told its keys the previous token is removed.

What supplies the previous token to a head of layer l: the mixers of the layers below it (their head outputs, set
to 0, as ``ablation=[zero]`` does) and, in its own layer and below, smeared keys (each key mixed with the previous
one: the smear is taken out, so every key holds its own position's input only). A head of layer 0 without smeared
keys has no such supply: removing it changes nothing, so its score cannot fall and it never counts; a plain head of
layer 0 cannot pass the threshold anyway, as it sees what a position-only pattern sees (the probe's bound). With
smeared keys it has one, and may count: that is Olsson et al.'s one-layer induction head.

One forward pass of the probe (a few dozen rows of the context's length) for the clean scores and one for each
layer with a head at or above the threshold: cheap enough for every validation."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

import torch
from torch import Tensor, nn

from attention_lab.analysis.ablation import head_output_name
from attention_lab.analysis.head_scores import induction_score
from attention_lab.attention.hooks import capture, hook_points, intervene
from attention_lab.data.corpus import PAD_ID

__all__ = ["formed_heads", "prefix_scores", "supply_removed"]


def prefix_scores(model: nn.Module, probe: Tensor) -> dict[int, Tensor]:
    """The prefix-matching score per head on ``probe`` (R, T) of every layer that exposes attention weights: layer ->
    (H,) (a layer without them, such as a recurrence's, is left out; its number is kept for the others)."""
    with torch.no_grad(), capture(model, points=("weights",)) as cache:
        model(probe)
    real = probe != PAD_ID
    scores = {}
    for layer, weights in cache.by_layer("weights").items():
        score = induction_score(weights.float(), probe, real)
        scores[layer] = score if score is not None else torch.zeros(weights.shape[1])
    return scores


def head_outputs_below(model: nn.Module, layer: int) -> list[str]:
    """The ``hook_head_output`` points of the blocks below ``layer``."""
    points = hook_points(model)
    return [name for name in map(head_output_name, range(layer)) if name in points]


def smears_up_to(model: nn.Module, layer: int) -> list[nn.Module]:
    """The smeared-keys modules of the blocks up to ``layer`` (an attention module's ``smeared_keys``, None
    without them)."""
    return [block.attention.smeared_keys for block in model.blocks[:layer + 1]
            if getattr(block.attention, "smeared_keys", None) is not None]


@contextmanager
def supply_removed(model: nn.Module, layer: int) -> Iterator[None]:
    """During the block, nothing gives the keys of ``layer`` the previous token: every head of the layers below
    writes 0, and smeared keys up to ``layer`` pass the plain key (a forward hook returns the module's input)."""
    with ExitStack() as stack:
        stack.enter_context(intervene(model, {name: torch.zeros_like for name in head_outputs_below(model, layer)}))
        for module in smears_up_to(model, layer):
            handle = module.register_forward_hook(lambda _module, args, _output: args[0])
            stack.callback(handle.remove)
        yield


def formed_heads(model: nn.Module, probe: Tensor, threshold: float) -> list[tuple[int, int, float, float]]:
    """The heads that meet the rule, as (layer, head, score, score with the supply removed): prefix matching on
    ``probe`` at least ``threshold``, and below it once the supply of the previous token is removed."""
    was_training = model.training
    model.eval()
    try:
        clean = prefix_scores(model, probe)
        found = []
        for layer, scores in clean.items():
            candidates = [head for head, score in enumerate(scores.tolist()) if score >= threshold]
            if not candidates:
                continue
            with supply_removed(model, layer):
                ablated = prefix_scores(model, probe)[layer]
            found += [(layer, head, float(scores[head]), float(ablated[head])) for head in candidates
                      if float(ablated[head]) < threshold]
        return found
    finally:
        model.train(was_training)
