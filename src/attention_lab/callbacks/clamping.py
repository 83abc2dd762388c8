"""Clamping heads during training (Singh et al. 2024, "What needs to go right for an induction head?"): chosen heads'
outputs are replaced while the trainer's step is inside a window, and the run shows whether the phase change still
happens, and how long after the release it takes.

The heads (``clamp``, patterns read by :mod:`attention_lab.analysis.clamp`) have their output before the heads are
merged (``hook_head_output``, where ablation and patching act) replaced in every forward pass of the model made
while ``trainer.global_step`` is in [``clamp_from``, ``clamp_until``):

- ``zero``: by 0;
- ``mean``: at each position, by the head's mean over the real (non-pad) queries of the same forward pass, detached:
  the ablation's mean (:mod:`attention_lab.analysis.ablation`) taken over the batch at hand instead of the whole
  validation set, which training would have to measure again after every step. What the head says whatever the
  input stays; what depends on the input goes.

Either way no gradient reaches the clamped heads through their output: their own query, key and value weights get
none while clamped (under ``zero`` neither do the output projection's columns that read them; AdamW's momentum from
steps before the window still moves them, so they stay as they were only in a window that opens at step 0).

A pass at step s is clamped when s is in the window: the training step that takes the weights from s to s + 1, a
validation after s steps, and so the final validation when the run ends inside the window. Every pass means every
pass: the validation's own, and those the other callbacks make at a validation (head scores, ablation, patching,
the probe's maps), so what a validation measures while the window is open is the clamped model. That is why the
edit is attached once, when fit (or the final validate) sets up, and checks the step at each pass, rather than being
attached around each step: the order of the other callbacks' hooks cannot put a pass outside it. A checkpoint holds
the weights alone: the attention tab's sentence box and ``visualize.py`` show the model unclamped.

metrics.json records the window, ``clamp: {heads, kind, from, until}`` (the heads as resolved ``layer{l}/head{h}``)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from contextlib import ExitStack
from typing import Any

import lightning as L
import torch
from torch import Tensor, nn

from attention_lab.analysis.ablation import head_output_name
from attention_lab.analysis.clamp import Window, resolve
from attention_lab.analysis.patching import patched_layers
from attention_lab.analysis.tags import layer_head
from attention_lab.attention.hooks import Edit, intervene, replace_heads, zero_heads
from attention_lab.callbacks.findings import Findings
from attention_lab.config import ClampKind
from attention_lab.data.corpus import PAD_ID

log = logging.getLogger(__name__)


def batch_means(tensor: Tensor, real: Tensor | None) -> Tensor:
    """(1, H, T, d): each head's output at each position averaged over the batch's real queries (``real`` (B, T);
    None or of another shape: every query counts), detached; 0 at a position without one."""
    batch, _, length, _ = tensor.shape
    if real is None or tuple(real.shape) != (batch, length):
        real = torch.ones(batch, length, dtype=torch.bool, device=tensor.device)
    weights = real.to(tensor.dtype)[:, None, :, None]  # (B, 1, T, 1)
    total = (tensor.detach() * weights).sum(0, keepdim=True)
    return total / weights.sum(0, keepdim=True).clamp_min(1)


class Clamping(Findings):
    """``heads``: the ``clamp`` patterns ([] clamps nothing); ``kind``: ``clamp_kind``; ``start``, ``until``: the
    window's ``clamp_from`` and ``clamp_until``."""

    def __init__(self, heads: Sequence[str] = (), kind: str = ClampKind.zero.value, start: int = 0,
                 until: int | None = None) -> None:
        self.patterns = [str(pattern) for pattern in heads]
        self.kind = ClampKind(kind)
        self.window = Window(start, until)
        self.heads: list[tuple[int, int]] = []  # resolved on the model at setup
        self.attached: ExitStack | None = None
        self.real: Tensor | None = None  # the real queries of the model's current forward pass (kind mean)

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if not self.patterns:
            return
        self.release()
        model = pl_module.model
        layers = {layer: model.blocks[layer].attention.num_heads for layer in patched_layers(pl_module)}
        self.heads = resolve(self.patterns, layers, len(model.blocks), f"model={pl_module.config.name}")
        by_layer: dict[int, list[int]] = {}
        for layer, head in self.heads:
            by_layer.setdefault(layer, []).append(head)
        stack = ExitStack()
        stack.enter_context(intervene(model, {head_output_name(layer): self.edit(trainer, heads)
                                              for layer, heads in by_layer.items()}))
        if self.kind is ClampKind.mean:
            stack.callback(model.register_forward_pre_hook(self.remember_real).remove)
        self.attached = stack
        if stage == "fit":
            until = "the end" if self.window.until is None else f"step {self.window.until}"
            log.info("clamping %d heads (%s) to their %s output from step %d to %s", len(self.heads),
                     ", ".join(layer_head(*pair) for pair in self.heads), self.kind.value, self.window.start, until)

    def edit(self, trainer: L.Trainer, heads: list[int]) -> Edit:
        """The edit of one layer's head outputs: the clamp while the trainer's step is in the window, else none."""
        zero = zero_heads(heads)

        def clamp(tensor: Tensor) -> Tensor:
            if not self.window.holds(trainer.global_step):
                return tensor
            if self.kind is ClampKind.zero:
                return zero(tensor)
            return replace_heads(batch_means(tensor, self.real), heads)(tensor)
        return clamp

    def remember_real(self, module: nn.Module, args: tuple[Any, ...]) -> None:
        """Before each forward pass of the model: which of its queries are real (its tokens, not <pad>)."""
        self.real = args[0] != PAD_ID if args and isinstance(args[0], Tensor) else None

    def release(self) -> None:
        if self.attached is not None:
            self.attached.close()
        self.attached, self.real = None, None

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        self.release()

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        self.release()

    def findings(self) -> dict[str, Any]:
        if not self.patterns:
            return {}
        return {"clamp": {"heads": [layer_head(*pair) for pair in self.heads], "kind": self.kind.value,
                          "from": self.window.start, "until": self.window.until}}
