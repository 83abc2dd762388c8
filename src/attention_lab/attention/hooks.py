"""Hook points: see and change what attention computes without new arguments (TransformerLens's ``HookPoint``
and ``run_with_cache``, x-transformers' ``Intermediates``).

Every attention module has three points, each a submodule named ``hook_<point>``:

- ``hook_scores``: the scaled, biased and masked scores before the softmax, (B, H, T_q, T_k) (-inf where masked);
- ``hook_weights``: the weights after the softmax (and after dropout), (B, H, T_q, T_k);
- ``hook_head_output``: each head's context before the heads are merged, (B, H, T_q, d_v).

>>> with capture(model) as cache:             # one forward pass, every point
...     model(tokens)
>>> cache.layers("weights")                     # one (B, H, T, T) tensor per block, in order
>>> with intervene(model, {"blocks.1.attention.hook_head_output": zero_heads([2])}):
...     model(tokens)                           # head 2 of layer 1 switched off

When nothing is captured or changed at ``scores`` or ``weights``, attention takes the fused kernel, as it does without hooks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import torch
from torch import Tensor, nn

POINTS = ("scores", "weights", "head_output")
NEED_THE_MATRIX = ("scores", "weights")  # points that exist only on the explicit (non-fused) path

Edit = Callable[[Tensor], Tensor]


class HookPoint(nn.Module):
    """An identity that passes its tensor through the functions added to it, in order. It holds no parameters,
    so checkpoints and the notebooks' seeds are unchanged."""

    def __init__(self) -> None:
        super().__init__()
        self.functions: list[Edit] = []

    @property
    def active(self) -> bool:
        return bool(self.functions)

    def forward(self, tensor: Tensor) -> Tensor:
        for function in self.functions:
            tensor = function(tensor)
        return tensor


class HookPointError(KeyError):
    """A hook name that the model does not have: ``name`` and the names it has (``available``)."""

    def __init__(self, name: str, available: Sequence[str]) -> None:
        super().__init__(name)
        self.name, self.available = name, tuple(available)

    def __str__(self) -> str:
        shown = ", ".join(self.available[:6]) + (", ..." if len(self.available) > 6 else "")
        return f"no hook point {self.name!r} in this model; it has {shown}"


def hook_points(model: nn.Module) -> dict[str, HookPoint]:
    """Every hook point under ``model`` by its module path, e.g. ``blocks.0.attention.hook_weights``."""
    return {name: module for name, module in model.named_modules() if isinstance(module, HookPoint)}


def point_of(name: str) -> str:
    """``blocks.0.attention.hook_weights`` -> ``weights``."""
    return name.rpartition(".")[2].removeprefix("hook_")


class ActivationCache(dict):
    """Hook name -> the tensor that passed there (detached)."""

    def layers(self, point: str, stack: str = "blocks") -> list[Tensor]:
        """The tensors of ``point`` in the blocks of ``stack`` (``blocks``, or ``encoder`` for an
        encoder-decoder's encoder), by layer."""
        return list(self.by_layer(point, stack).values())

    def by_layer(self, point: str, stack: str = "blocks") -> dict[int, Tensor]:
        """Layer -> the tensor of ``point`` there, in layer order; a layer without the point is left out (its
        number kept for the others)."""
        prefix, suffix = f"{stack}.", f".attention.hook_{point}"
        found = {int(name[len(prefix):-len(suffix)]): tensor for name, tensor in self.items()
                 if name.startswith(prefix) and name.endswith(suffix) and name[len(prefix):-len(suffix)].isdigit()}
        return dict(sorted(found.items()))


@contextmanager
def attached(points: Mapping[str, HookPoint], functions: Mapping[str, Edit]) -> Iterator[None]:
    """Adds each function to its point for the duration; removes exactly those on exit, also on error."""
    added: list[tuple[HookPoint, Edit]] = []
    try:
        for name, function in functions.items():
            points[name].functions.append(function)
            added.append((points[name], function))
        yield
    finally:
        for point, function in added:
            point.functions.remove(function)


def chosen(model: nn.Module, names: Iterable[str] | None, points: Iterable[str] | None) -> dict[str, HookPoint]:
    available = hook_points(model)
    if names is not None:
        missing = [name for name in names if name not in available]
        if missing:
            raise HookPointError(missing[0], list(available))
        available = {name: available[name] for name in names}
    if points is not None:
        wanted = set(points)
        unknown = wanted - set(POINTS)
        if unknown:
            raise HookPointError(sorted(unknown)[0], POINTS)
        available = {name: point for name, point in available.items() if point_of(name) in wanted}
    return available


@contextmanager
def capture(model: nn.Module, *, points: Iterable[str] | None = None,
            names: Iterable[str] | None = None) -> Iterator[ActivationCache]:
    """Collects what passes the hook points during the block (all of them, or only ``points`` such as
    ``("weights",)``, or the hook ``names``). A second forward pass inside the block overwrites the first."""
    cache = ActivationCache()

    def keeper(name: str) -> Edit:
        def keep(tensor: Tensor) -> Tensor:
            cache[name] = tensor.detach()
            return tensor
        return keep

    selected = chosen(model, names, points)
    with attached(selected, {name: keeper(name) for name in selected}):
        yield cache


@contextmanager
def intervene(model: nn.Module, edits: Mapping[str, Edit]) -> Iterator[None]:
    """Replaces the tensor at each named hook point by ``edit(tensor)`` during the block."""
    selected = chosen(model, list(edits), None)
    with attached(selected, dict(edits)):
        yield


def head_mask(tensor: Tensor, heads: Sequence[int]) -> Tensor:
    """(1, H, 1, 1) bool, True at ``heads``: broadcasts over (B, H, T, d)."""
    mask = torch.zeros(tensor.shape[-3], dtype=torch.bool, device=tensor.device)
    mask[list(heads)] = True
    return mask[None, :, None, None]


def zero_heads(heads: Sequence[int]) -> Edit:
    """Zero ablation: the heads' outputs (or weights) become 0."""
    return lambda tensor: tensor.masked_fill(head_mask(tensor, heads), 0.0)


def replace_heads(values: Tensor, heads: Sequence[int]) -> Edit:
    """The heads' tensors become those of ``values``, broadcast over the batch: a mean over a dataset (mean
    ablation, ``values`` (1, H, T, d) or (H, T, d)) or the same heads on another input (activation patching,
    ``values`` of the same shape)."""
    def replace(tensor: Tensor) -> Tensor:
        source = values[..., : tensor.shape[-2], :].to(tensor.dtype)
        return torch.where(head_mask(tensor, heads), source.expand_as(tensor), tensor)
    return replace


def uniform_heads(heads: Sequence[int]) -> Edit:
    """At ``hook_scores``: every allowed key gets the same score, so the heads attend uniformly."""
    return lambda scores: torch.where(head_mask(scores, heads) & scores.isfinite(), torch.zeros_like(scores), scores)
