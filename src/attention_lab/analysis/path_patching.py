"""Path patching (Wang et al. 2022): the share of the logit difference that one path, head -> head or logits, carries.

Wang et al. 2022, "Interpretability in the Wild" (the IOI paper), Appendix B, as ARENA's IOI chapter implements
it: how much of the clean - corrupted logit difference flows along one path, sender head -> a later receiver
head's query, key or value input, or sender -> logits.

Activation patching (:mod:`attention_lab.analysis.patching`) puts a head's clean output back into the corrupted run
and lets everything after it recompute, so it measures every path out of the head at once. Path patching isolates
one of them, in the same direction as activation patching (clean into corrupted, so that 0 = the corrupted run
and 1 = the clean one, with the same metric, :func:`~attention_lab.analysis.patching.logit_diff_sum`, and the same
normalisation, :func:`~attention_lab.analysis.patching.restored`; ARENA patches corrupted into clean, the mirror
image):

1. cache every head's output (``hook_head_output``) on the clean and on the corrupted input;
2. run the corrupted input with the sender's output set to its clean value and every other head's output, in
   every layer, frozen at its corrupted value (the freeze set: all heads but the sender; the embeddings, the
   LayerNorms and the MLPs are not frozen, they recompute, as in ARENA). Record the input that each later
   layer's q/k/v projections read (the block's normalised residual stream) and the final residual stream. The
   logits of this run are the direct path, sender -> logits (``.../logits``): only the sender's change reaches
   them, through its ``out_proj`` slice (and the MLPs after it, where the blocks have them);
3. run the corrupted input again, nothing frozen, with only the receiver head's query, key or value projection
   (its own columns of ``W_query``, ``W_key`` or ``W_value``) reading the recorded input instead of its own.

Tags: ``path_patching/logit_diff/layer{a}/head{i}/layer{b}/head{j}/{q,k,v}`` and
``path_patching/logit_diff/layer{a}/head{i}/logits``.

What it cannot tell: a path through several heads (a -> b -> c) counts in the receiver b's value, not as its own;
the three inputs of one receiver interact, so its q, k and v values need not add up to patching all three at
once; with MLPs or LayerNorm, values of separate paths do not add up to the activation patch either (only in an
attention-only model without LayerNorm is the logit difference linear in each head's output, see the tests).
What each layer takes, in a residual stream (:func:`unsupported` names the models where nothing can be measured:
an encoder-decoder, blocks without a residual stream, no layer with heads of its own):

- senders: the heads of every layer whose heads have weights of their own
  (:func:`~attention_lab.analysis.patching.patched_layers`), whatever the mixer (a recurrence such as
  ``gated_deltanet`` or ``mamba2`` too): freezing and patching go through each layer's ``hook_head_output``, and
  the direct path sender -> logits is defined for all of them;
- receivers: the heads of the layers where each head has its own columns of W_query, W_key and W_value, read by
  nothing but them (multi-head attention without its own ``project``, grouped keys and values or input gates).
  :func:`receiver_layers` lists them and names the others with why; by default the paths into the others are
  skipped, and a receiver asked for there raises :class:`PathPatchingError`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor

from attention_lab.analysis.ablation import head_output_name
from attention_lab.analysis.layer_memory import layer_list
from attention_lab.analysis.patching import Patched, logit_diff_sum, patched_layers, restored
from attention_lab.analysis.tags import COMPOSITIONS, Head, PathTag, layer_head
from attention_lab.analysis.tags import PATH_DIRECT as DIRECT
from attention_lab.attention.base import AttentionModule
from attention_lab.attention.hooks import capture, intervene, replace_heads
from attention_lab.attention.multihead import MultiHeadAttention

__all__ = ["path_patch", "patch_paths", "unsupported", "receiver_layers", "path_tag", "PathPatchingError"]

log = logging.getLogger(__name__)

PROJECTIONS = {"q": "W_query", "k": "W_key", "v": "W_value"}  # the receiver input -> the projection reading it
Input = tuple[int, int, str]  # (layer, head, kind): one receiver head's q, k or v input


class PathPatchingError(ValueError):
    """A sender/receiver pair path patching cannot take: ``sender``, ``receiver`` (layer, head) and ``why``."""

    def __init__(self, sender: Head, receiver: Head | None, why: str) -> None:
        super().__init__(why)
        self.sender, self.receiver, self.why = sender, receiver, why

    def __str__(self) -> str:
        pair = layer_head(*self.sender) + ("" if self.receiver is None else f" -> {layer_head(*self.receiver)}")
        return f"path patching {pair}: {self.why}"


def path_tag(sender: Head, receiver: Head | None = None, kind: str = DIRECT) -> str:
    """``path_patching/logit_diff/layer{a}/head{i}/layer{b}/head{j}/{kind}``, or ``.../logits`` (no receiver):
    :class:`~attention_lab.analysis.tags.PathTag`'s."""
    return PathTag(sender, receiver, kind).tag


def unsupported(module) -> str | None:
    """Why path patching can measure nothing at all in ``module``'s model, or None when some sender can be
    measured (the layers that cannot receive: :func:`receiver_layers`)."""
    model = module.model
    if getattr(model, "encoder", None):
        return "an encoder-decoder's decoder reads a second sequence"
    for layer, block in enumerate(model.blocks):
        if not block.residual:
            return f"layer {layer} has no residual stream for a path to run along"
    if not patched_layers(module):
        return "no layer has heads with weights of their own to send along a path"
    return None


def receiver_reason(attention) -> str | None:
    """Why the heads of a layer with this attention module cannot be receivers, or None when they can: each must
    read its query, key and value input through its own columns of W_query, W_key and W_value and nothing else."""
    if not isinstance(attention, MultiHeadAttention) or type(attention).project is not MultiHeadAttention.project:
        return "no per-head W_query/W_key/W_value"
    if type(attention).gate_heads is not AttentionModule.gate_heads:
        return "a gate on each head computed from its input, a fourth path into the head"
    if attention.kv_heads != attention.num_heads:
        return f"keys and values shared between heads (kv_heads={attention.kv_heads})"
    return None


def variants(model) -> list[str]:
    """Each layer's attention variant, as the config names it."""
    return model.config.layer_variants()


def receiver_layers(module) -> tuple[list[int], str | None]:
    """(the layers whose heads can be receivers, one line naming the others and why, or None when there are none),
    e.g. ``layers 0, 2 (gated_deltanet): no per-head W_query/W_key/W_value``."""
    reasons = [receiver_reason(block.attention) for block in module.model.blocks]
    names = variants(module.model)
    groups: dict[tuple[str, str], list[int]] = {}
    for layer, why in enumerate(reasons):
        if why is not None:
            groups.setdefault((names[layer], why), []).append(layer)
    line = "; ".join(f"{layer_list(layers)} ({variant}): {why}" for (variant, why), layers in groups.items())
    return [layer for layer, why in enumerate(reasons) if why is None], line or None


def check_pair(module, sender: Head, receivers: Iterable[Head]) -> None:
    blocks = module.model.blocks
    layer, head = sender
    if not (0 <= layer < len(blocks) and 0 <= head < blocks[layer].attention.num_heads):
        raise PathPatchingError(sender, None, f"no such head in a model of {len(blocks)} layers")
    if layer not in patched_layers(module):
        raise PathPatchingError(sender, None, f"layer {layer} ({variants(module.model)[layer]}) has no heads with "
                                              "weights of their own to send along a path")
    for receiver in receivers:
        to_layer, to_head = receiver
        if to_layer <= layer:
            raise PathPatchingError(sender, receiver, "the receiver must be in a later layer than the sender")
        if not (to_layer < len(blocks) and 0 <= to_head < blocks[to_layer].attention.num_heads):
            raise PathPatchingError(sender, receiver, f"no such receiver in a model of {len(blocks)} layers")
        why = receiver_reason(blocks[to_layer].attention)
        if why is not None:
            raise PathPatchingError(sender, receiver, f"layer {to_layer} ({variants(module.model)[to_layer]}) "
                                                      f"cannot receive: {why}")


@contextmanager
def recorded_inputs(model, layers: Sequence[int]) -> Iterator[dict]:
    """Layer -> the (normalised) input its attention reads, and ``DIRECT`` -> the final residual stream."""
    found: dict = {}
    handles = [model.blocks[layer].attention.register_forward_pre_hook(
        lambda module, args, layer=layer: found.__setitem__(layer, args[0].detach())) for layer in layers]
    handles.append(model.final_norm.register_forward_pre_hook(
        lambda module, args: found.__setitem__(DIRECT, args[0].detach())))
    try:
        yield found
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def receiver_inputs(model, inputs: Mapping[Input, Tensor]) -> Iterator[None]:
    """Each (layer, head, kind)'s projection computes that head's columns from the given input instead of the
    block's: a forward hook on ``W_query``/``W_key``/``W_value`` rewrites only those columns, so the other heads
    (and the attention modules' code) are untouched."""
    by_projection: dict[tuple[int, str], list[tuple[int, Tensor]]] = {}
    for (layer, head, kind), tensor in inputs.items():
        by_projection.setdefault((layer, kind), []).append((head, tensor))
    handles = []
    for (layer, kind), entries in by_projection.items():
        attention = model.blocks[layer].attention

        def rewrite(linear, args, out, entries=entries, width=attention.head_dim):
            out = out.clone()
            for head, tensor in entries:
                cols = slice(head * width, (head + 1) * width)
                bias = None if linear.bias is None else linear.bias[cols]
                out[..., cols] = F.linear(tensor.to(out.dtype), linear.weight[cols], bias)
            return out

        handles.append(getattr(attention, PROJECTIONS[kind]).register_forward_hook(rewrite))
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


@contextmanager
def direct_path(model, delta: Tensor | None) -> Iterator[None]:
    """Adds ``delta`` to the final residual stream (before the final norm); nothing when None."""
    handle = None if delta is None else model.final_norm.register_forward_pre_hook(
        lambda module, args: (args[0] + delta.to(args[0].dtype),))
    try:
        yield
    finally:
        if handle is not None:
            handle.remove()


def sender_run(module, batch: Patched, sender: Head) -> tuple[float, float, float, dict, Tensor]:
    """Steps 1 and 2 on one batch: (clean sum, corrupted sum, direct-path sum, the recorded inputs of the later
    layers, the change of the final residual stream)."""
    inputs, corrupted, targets, implied, mask = batch
    model, (layer, head) = module.model, sender
    names = [head_output_name(index) for index in range(len(model.blocks))]
    with capture(model, names=names) as clean:
        clean_sum = logit_diff_sum(module(inputs), targets, implied, mask)
    with capture(model, names=names) as frozen, recorded_inputs(model, []) as plain:
        corrupted_sum = logit_diff_sum(module(corrupted), targets, implied, mask)
    # The freeze set: every head at its corrupted output, but the sender at its clean one.
    frozen[names[layer]] = replace_heads(clean[names[layer]], [head])(frozen[names[layer]])
    edits = {name: replace_heads(frozen[name], range(frozen[name].shape[1])) for name in names}
    with intervene(model, edits), recorded_inputs(model, range(layer + 1, len(model.blocks))) as found:
        direct_sum = logit_diff_sum(module(corrupted), targets, implied, mask)
    return clean_sum, corrupted_sum, direct_sum, found, found[DIRECT] - plain[DIRECT]


def every_input(module, sender: Head, receivers: Sequence[Head] | None) -> list[Input]:
    blocks = module.model.blocks
    if receivers is None:  # every head of every later layer that can receive; the others are skipped
        receivers = [(b, j) for b in receiver_layers(module)[0] if b > sender[0]
                     for j in range(blocks[b].attention.num_heads)]
    check_pair(module, sender, receivers)
    return [(b, j, kind) for b, j in receivers for kind in COMPOSITIONS]


@torch.no_grad()
def path_patch(module, batches: Iterable[Patched], sender: Head,
               receivers: Sequence[Head] | None = None) -> dict[str, float]:
    """Each path sender -> receiver q/k/v (``receivers``: (layer, head) pairs; by default all heads of every later
    layer that can receive, :func:`receiver_layers`) and sender -> logits, on batches from
    :func:`~attention_lab.analysis.patching.corrupt_batch`: ``{path_tag(...): fraction restored}``; {} when no
    position counts or the model is :func:`unsupported`. Raises :class:`PathPatchingError` (before any forward
    pass) for a sender whose layer has no heads of its own, or a receiver not in a later layer or in a layer that
    cannot receive."""
    inputs = every_input(module, sender, receivers)
    cases: list[tuple[str, list[Input], bool]] = [(path_tag(sender), [], True)]
    cases += [(path_tag(sender, (b, j), kind), [(b, j, kind)], False) for b, j, kind in inputs]
    return sweep(module, batches, sender, cases)


@torch.no_grad()
def patch_paths(module, batches: Iterable[Patched], sender: Head, inputs: Sequence[Input],
                direct: bool = False) -> float:
    """The fraction restored when the paths from ``sender`` into all of ``inputs`` ((layer, head, kind) triples)
    and, with ``direct``, into the logits are patched in one run; NaN when unsupported or nothing counts."""
    check_pair(module, sender, [(b, j) for b, j, _ in inputs])
    return sweep(module, batches, sender, [("joint", list(inputs), direct)]).get("joint", float("nan"))


def sweep(module, batches: Iterable[Patched], sender: Head, cases: list[tuple[str, list[Input], bool]]) -> dict:
    """Each case (tag, receiver inputs patched together, whether the direct path is patched too) over the
    batches. A case of no inputs with the direct path is step 2's run itself."""
    reason = unsupported(module)
    if reason is not None:
        log.info("path patching: not measured, %s", reason)
        return {}
    patched = [batch for batch in batches if bool(batch[4].any())]
    if not patched:
        return {}
    model = module.model
    clean_sum, corrupted_sum, sums = 0.0, 0.0, [0.0] * len(cases)
    was_training = module.training
    module.eval()
    try:
        for batch in patched:
            clean, corrupted, direct, found, delta = sender_run(module, batch, sender)
            clean_sum, corrupted_sum = clean_sum + clean, corrupted_sum + corrupted
            _, corrupted_inputs, targets, implied, mask = batch
            for index, (_, chosen, with_direct) in enumerate(cases):
                if not chosen and with_direct:
                    sums[index] += direct
                    continue
                patch = {(b, j, kind): found[b] for b, j, kind in chosen}
                with receiver_inputs(model, patch), direct_path(model, delta if with_direct else None):
                    sums[index] += logit_diff_sum(module(corrupted_inputs), targets, implied, mask)
    finally:
        module.train(was_training)
    # Sums, not means: every sum runs over the same positions, so their ratio is that of the means.
    return {name: restored(value, clean_sum, corrupted_sum) for value, (name, _, _) in zip(sums, cases, strict=True)}
