"""Attribution patching (Nanda 2023): activation patching of every head at once, estimated to first order from one
gradient. From N. Nanda, "Attribution Patching: Activation Patching At Industrial Scale" (2023).

:mod:`attention_lab.analysis.patching` runs the corrupted input once per head with that head's clean output put
back. Here the metric M (the logit difference of patching, summed over the positions the corruption changes) is
linearised around the corrupted run instead: patching head h changes M by about (a_clean - a_corrupt) . dM/da, a the
head's output before the heads are merged (``hook_head_output``), the gradient taken at the corrupted run. Two
forward passes (clean, cached; corrupted, with gradients at every head output) and one backward pass estimate every
head of every layer with learned heads, where patching needs a forward pass per head. Normalised as patching is:
``attribution/logit_diff/layer{l}/head{h}`` is the estimated share of M_clean - M_corrupt restored.

Exact where M is linear in the head's output downstream of it (one attention-only layer: only the output projection
and the unembedding follow). It fails where it is not: a head whose output feeds a later softmax that saturates (the
gradient is ~0 although a large change flips the attention), LayerNorm, MLPs, or a clean output far from the
corrupted one. Compare it with patching (:func:`rank_correlation`) before trusting it on a new model.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import torch
from torch import Tensor

from attention_lab.analysis.ablation import head_output_name
from attention_lab.analysis.patching import Patched, logit_diff, logit_diff_sum, patched_layers, restored
from attention_lab.analysis.tags import ATTRIBUTION, tag
from attention_lab.attention.hooks import capture, intervene

__all__ = ["attribute_batches", "rank_correlation"]


def head_gradients(module, corrupted: Tensor, targets: Tensor, implied: Tensor, mask: Tensor,
                   names: list[str]) -> tuple[float, dict[str, Tensor], dict[str, Tensor]]:
    """(M on the corrupted input, each hook's output there, dM/d that output): one forward, one backward. A zero
    tensor added at each hook point carries the gradient, so it includes every path downstream (later layers'
    heads see the change) and the parameters' ``.grad`` are left alone."""
    outputs: dict[str, Tensor] = {}
    shifts: dict[str, Tensor] = {}

    def shifted(name: str):
        def shift(tensor: Tensor) -> Tensor:
            outputs[name] = tensor.detach()
            shifts[name] = torch.zeros_like(tensor, requires_grad=True)
            return tensor + shifts[name]
        return shift

    with torch.enable_grad(), intervene(module.model, {name: shifted(name) for name in names}):
        metric = logit_diff(module(corrupted), targets, implied, mask)
        gradients = torch.autograd.grad(metric, [shifts[name] for name in names], allow_unused=True)
    found = {name: torch.zeros_like(shifts[name]) if g is None else g for name, g in zip(names, gradients, strict=True)}
    return float(metric.detach()), outputs, found


def attribute_batches(module, batches: Iterable[Patched]) -> dict[str, float]:
    """Every head of every layer with learned heads, its activation patching
    (:func:`~attention_lab.analysis.patching.patch_batches`, same batches) estimated to first order:
    ``{"attribution/logit_diff/layer{l}/head{h}": share of the clean - corrupted logit difference}``; NaN where
    clean = corrupted; {} when no position of ``batches`` counts."""
    patched = [batch for batch in batches if bool(batch[4].any())]
    if not patched:
        return {}
    layers = patched_layers(module)
    names = [head_output_name(layer) for layer in layers]
    sums = {name: torch.zeros(module.model.blocks[layer].attention.num_heads, dtype=torch.float64)
            for layer, name in zip(layers, names, strict=True)}
    clean_sum, corrupted_sum = 0.0, 0.0
    was_training = module.training
    module.eval()
    try:
        for inputs, corrupted, targets, implied, mask in patched:
            with torch.no_grad(), capture(module.model, names=names) as clean:
                clean_sum += logit_diff_sum(module(inputs), targets, implied, mask)
            metric, outputs, gradients = head_gradients(module, corrupted, targets, implied, mask, names)
            corrupted_sum += metric
            for name in names:  # (B, H, T, d_v) -> one number per head
                change = (clean[name] - outputs[name]).double() * gradients[name].double()
                sums[name] += change.sum(dim=(0, 2, 3)).cpu()
    finally:
        module.train(was_training)
    return {tag(ATTRIBUTION, layer, head): restored(corrupted_sum + float(value), clean_sum, corrupted_sum)
            for layer, name in zip(layers, names, strict=True) for head, value in enumerate(sums[name])}


def average_ranks(values: list[float]) -> Tensor:
    """1-based ranks, tied values sharing the mean of the ranks they span."""
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = torch.empty(len(values), dtype=torch.float64)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        ranks[order[start:end + 1]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def rank_correlation(estimate: Mapping[str, float], exact: Mapping[str, float]) -> float:
    """Spearman's rank correlation of two per-head measurements over the tags both hold with a number (NaN left
    out), ties by average rank: the Pearson correlation of the ranks. NaN with fewer than two such heads or where
    either side ranks them all equal."""
    shared = [key for key in estimate if key in exact and not math.isnan(estimate[key]) and not math.isnan(exact[key])]
    if len(shared) < 2:
        return math.nan
    x, y = (average_ranks([float(side[key]) for key in shared]) for side in (estimate, exact))
    x, y = x - x.mean(), y - y.mean()
    scale = float((x.square().sum() * y.square().sum()).sqrt())
    return float((x * y).sum()) / scale if scale > 0 else math.nan
