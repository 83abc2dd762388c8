"""What each head does, tested: switch it off and score the validation set again.

For every block of the model (the decoder's for an encoder-decoder), each head in turn and then the whole layer
has its output, before the heads are merged (``hook_head_output``), replaced:

- ``zero``: by 0;
- ``mean``: by its mean over the validation set at that position (over the real, non-pad queries), which keeps
  what the head says regardless of the input and removes only what depends on it.

The change is recorded as ``ablation/<how>/loss/...`` (the increase of the validation loss) and
``ablation/<how>/token_acc/...`` (the drop of the token accuracy, 0..1): large = the model needs that head.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from attention_lab.analysis.tags import ABLATIONS, ablation_family, tag
from attention_lab.attention.hooks import Edit, capture, intervene, replace_heads, zero_heads
from attention_lab.data.corpus import PAD_ID

__all__ = ["ablate_heads", "head_output_name"]

Batch = tuple[Tensor, Tensor]


def head_output_name(layer: int) -> str:
    """The hook point of layer ``layer``'s head outputs, where ablation and patching act."""
    return f"blocks.{layer}.attention.hook_head_output"


@torch.no_grad()
def score(module, batches: Sequence[Batch], edits: dict[str, Edit] | None = None) -> tuple[float, float]:
    """(loss, token accuracy) of ``module`` over ``batches``, every real target counted once."""
    loss_sum, right, count = 0.0, 0, 0
    with intervene(module.model, edits or {}):
        for inputs, targets in batches:
            logits = module(inputs)
            real = targets != PAD_ID
            loss_sum += float(F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=PAD_ID, reduction="sum"))
            right += int(((logits.argmax(-1) == targets) & real).sum())
            count += int(real.sum())
    return loss_sum / max(count, 1), right / max(count, 1)


@torch.no_grad()
def head_output_means(module, batches: Sequence[Batch]) -> dict[str, Tensor]:
    """Hook name -> (1, H, T, d_v): each head's output at each position, averaged over the real queries."""
    names = [head_output_name(layer) for layer in range(len(module.model.blocks))]
    outputs: dict[str, list[Tensor]] = {name: [] for name in names}
    reals = []
    width = max(inputs.shape[1] for inputs, _ in batches)
    for inputs, _ in batches:
        with capture(module.model, names=names) as cache:
            module(inputs)
        pad = width - inputs.shape[1]  # batches of one validation set share a width; pad in case they do not
        reals.append(F.pad(inputs != PAD_ID, (0, pad)))
        for name in names:
            outputs[name].append(F.pad(cache[name], (0, 0, 0, pad)))
    real = torch.cat(reals).to(torch.float64)[:, None, :, None]  # (N, 1, T, 1)
    count = real.sum(0, keepdim=True).clamp_min(1)
    return {name: ((torch.cat(parts).to(torch.float64) * real).sum(0, keepdim=True) / count).float()
            for name, parts in outputs.items()}


def edit_for(how: str, heads: Sequence[int], means: dict[str, Tensor], name: str) -> Edit:
    return zero_heads(heads) if how == "zero" else replace_heads(means[name], heads)


@torch.no_grad()
def ablate_heads(module, batches: Iterable[Batch], hows: Sequence[str] = ABLATIONS) -> dict[str, float]:
    """Every head of every block whose heads have weights of their own (``learned_heads``), then every such whole
    block, ablated in each way of ``hows``:
    ``{"ablation/<how>/<metric>/layer{l}/head{h}" or ".../layer{l}/all": change}``."""
    unknown = [how for how in hows if how not in ABLATIONS]
    if unknown:
        raise ValueError(f"unknown ablation {unknown[0]!r}: choose among {', '.join(ABLATIONS)}")
    batches = list(batches)
    was_training = module.training
    module.eval()
    try:
        base_loss, base_acc = score(module, batches)
        means = head_output_means(module, batches) if "mean" in hows else {}
        results: dict[str, float] = {}
        for how in hows:
            for layer, block in enumerate(module.model.blocks):
                if not block.attention.learned_heads:  # a hybrid stack's layer with no head of its own to remove
                    continue
                name, heads = head_output_name(layer), block.attention.num_heads
                # Each head alone, then the whole layer (head None: ".../all").
                for chosen, head in [*(([h], h) for h in range(heads)), (list(range(heads)), None)]:
                    loss, acc = score(module, batches, {name: edit_for(how, chosen, means, name)})
                    results[tag(ablation_family(how, "loss"), layer, head)] = loss - base_loss
                    results[tag(ablation_family(how, "token_acc"), layer, head)] = base_acc - acc
        return results
    finally:
        module.train(was_training)
