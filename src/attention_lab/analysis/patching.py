"""Activation patching (Meng et al. 2022; Wang et al. 2022; TransformerLens's ``patching``): which heads carry the
information the task needs, measured by putting it back.

Each validation input is run twice: clean, and corrupted by the task's own corruption
(:meth:`attention_lab.data.tasks.Task.corrupted`: the induction's first copy reversed, recall's and mqar's values
passed on one key), which makes the task's mechanism imply another target at some positions. There the logit
difference is logit(correct target) - logit(the target the corrupted input implies), averaged over those
positions and the whole validation set. Then the corrupted input is run again with one head's output (or a
whole layer's: every head at once), before the heads are merged (``hook_head_output``), replaced by the clean
run's. The tags ``patching/logit_diff/layer{l}/head{h}`` and ``.../layer{l}/all`` hold the fraction of the
difference that this restores, (patched - corrupted) / (clean - corrupted): 0 nothing, 1 all of it (NaN where
the corruption changes nothing: clean = corrupted).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import torch
from torch import Tensor

from attention_lab.analysis.ablation import Batch, head_output_name
from attention_lab.analysis.tags import PATCHING, tag
from attention_lab.attention.hooks import capture, intervene, replace_heads
from attention_lab.data.corpus import PAD_ID
from attention_lab.data.tasks import Task

__all__ = ["patch_heads", "patch_batches", "corrupt_batch"]

# A patched batch: clean inputs, corrupted inputs, correct targets, implied targets, the positions that count.
Patched = tuple[Tensor, Tensor, Tensor, Tensor, Tensor]


def corrupt_row(task: Task, inputs: list[int], targets: list[int], bos: bool) -> tuple[list[int], list[int]]:
    """One padded row of a batch (with <bos> first where the run has one: ``bos``, task.bos) corrupted by ``task``:
    the example is cut out (no <bos>, no trailing <pad>), corrupted, and put back in place."""
    start = int(bos)
    end = len(inputs)
    while end > start and inputs[end - 1] == PAD_ID and targets[end - 1] == PAD_ID:
        end -= 1
    found = task.corrupted(inputs[start:end], targets[start:end])
    if found is None:
        return list(inputs), [PAD_ID] * len(targets)
    corrupted, implied = found
    return inputs[:start] + corrupted + inputs[end:], [PAD_ID] * start + implied + [PAD_ID] * (len(targets) - end)


def corrupt_batch(task: Task, batch: Batch, bos: bool = False) -> Patched:
    """(inputs, corrupted inputs, targets, implied targets, mask): mask (B, T) is True where the corrupted input
    implies a target other than the correct one, the positions the logit difference is taken at."""
    inputs, targets = batch
    rows = [corrupt_row(task, i, t, bos) for i, t in zip(inputs.tolist(), targets.tolist(), strict=True)]
    corrupted = torch.tensor([row for row, _ in rows], dtype=inputs.dtype, device=inputs.device)
    implied = torch.tensor([row for _, row in rows], dtype=targets.dtype, device=targets.device)
    mask = (targets != PAD_ID) & (implied != PAD_ID) & (implied != targets)
    return inputs, corrupted, targets, implied, mask


def logit_diff(logits: Tensor, targets: Tensor, implied: Tensor, mask: Tensor) -> Tensor:
    """Σ over the masked positions of logit(target) - logit(implied), a float64 tensor that gradients pass through
    (attribution patching differentiates it); logits (B, T, V), the rest (B, T)."""
    correct = logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1)  # (B, T)
    other = logits.gather(-1, implied.unsqueeze(-1)).squeeze(-1)  # (B, T)
    return ((correct - other).double() * mask).sum()


def logit_diff_sum(logits: Tensor, targets: Tensor, implied: Tensor, mask: Tensor) -> float:
    """:func:`logit_diff` as a number."""
    return float(logit_diff(logits, targets, implied, mask))


def patched_layers(module) -> list[int]:
    """The layers patched: those whose heads have weights of their own, as the ablation's."""
    return [layer for layer, block in enumerate(module.model.blocks) if block.attention.learned_heads]


def restored(patched: float, clean: float, corrupted: float) -> float:
    """(patched - corrupted) / (clean - corrupted); NaN where clean = corrupted (nothing to restore)."""
    gap = clean - corrupted
    return (patched - corrupted) / gap if gap != 0 else math.nan


@torch.no_grad()
def patch_heads(module, batches: Iterable[Batch], task: Task, bos: bool = False) -> dict[str, float]:
    """Every head of every layer with learned heads, then every such whole layer, patched from the clean run into
    the corrupted one: ``{"patching/logit_diff/layer{l}/head{h}" or ".../layer{l}/all": fraction restored}``;
    {} when the task's corruption affects no position of ``batches``. ``bos``: the inputs open with <bos>."""
    return patch_batches(module, [corrupt_batch(task, batch, bos) for batch in batches])


@torch.no_grad()
def patch_batches(module, batches: Iterable[Patched]) -> dict[str, float]:
    """:func:`patch_heads` on batches already corrupted (any pair of inputs of one length, e.g. two sentences
    typed in the attention tab, with the targets whose logit difference counts)."""
    patched = [batch for batch in batches if bool(batch[4].any())]
    if not patched:
        return {}
    layers = patched_layers(module)
    names = [head_output_name(layer) for layer in layers]
    # (layer, heads patched, head or None for the whole layer): each head alone, then the whole layer.
    cases: list[tuple[int, list[int], int | None]] = []
    for layer in layers:
        heads = list(range(module.model.blocks[layer].attention.num_heads))
        cases += [(layer, [h], h) for h in heads] + [(layer, heads, None)]
    clean_sum, corrupted_sum, patched_sums = 0.0, 0.0, [0.0] * len(cases)
    was_training = module.training
    module.eval()
    try:
        for inputs, corrupted, targets, implied, mask in patched:
            with capture(module.model, names=names) as cache:
                clean_sum += logit_diff_sum(module(inputs), targets, implied, mask)
            corrupted_sum += logit_diff_sum(module(corrupted), targets, implied, mask)
            for index, (layer, chosen, _) in enumerate(cases):
                name = head_output_name(layer)
                with intervene(module.model, {name: replace_heads(cache[name], chosen)}):
                    patched_sums[index] += logit_diff_sum(module(corrupted), targets, implied, mask)
    finally:
        module.train(was_training)
    # Sums, not means: every sum runs over the same positions, so their ratio is that of the means.
    return {tag(PATCHING, layer, head): restored(patched, clean_sum, corrupted_sum)
            for patched, (layer, _, head) in zip(patched_sums, cases, strict=True)}

