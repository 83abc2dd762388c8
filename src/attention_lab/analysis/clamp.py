"""Which heads a clamp holds, and when: the rules of the knobs ``clamp``, ``clamp_from`` and ``clamp_until``,
shared by the config checks (before any run dir exists) and the callback that clamps
(:mod:`attention_lab.callbacks.clamping`, on the model it was built with), so that both read a pattern alike.

- a pattern is ``layer{l}/head{h}`` (:func:`~attention_lab.analysis.tags.parse_layer_head`'s form), ``*`` standing
  for either number: ``layer0/head*`` is every head of layer 0, ``layer*/head*`` every head that can be clamped;
- a head can be clamped where its layer's heads have weights of their own (``learned_heads``: the layers that
  ablation and patching act on, :func:`~attention_lab.analysis.patching.patched_layers`); ``*`` over layers skips
  the others, and naming one of them is an error;
- the window is the steps [clamp_from, clamp_until), ``clamp_until`` None for the rest of the run.

Light (no torch import): the config checks use it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from attention_lab.analysis.tags import layer_head, parse_layer_head
from attention_lab.attention.declared import declared_variants
from attention_lab.config import block_heads
from attention_lab.errors import ConfigError
from attention_lab.names import did_you_mean

__all__ = ["ClampError", "Window", "parse_pattern", "resolve", "check_clamp"]

WILDCARD = "*"
EXAMPLE = "e.g. clamp=[layer0/head*]"


class ClampError(ConfigError):
    """A clamp knob that cannot work: ``setting`` (``clamp``, ``clamp_from`` or ``clamp_until``), the ``value`` as
    written, and what is ``allowed``; its message is the one line."""

    def __init__(self, setting: str, value: str, allowed: str) -> None:
        self.setting, self.value, self.allowed = setting, value, allowed
        super().__init__(f"{setting}={value} is invalid: {allowed}")


@dataclass(frozen=True)
class Window:
    """The steps [start, until) during which the heads are clamped (``until`` None: to the end of the run)."""

    start: int = 0
    until: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.start, bool) or not isinstance(self.start, int) or self.start < 0:
            raise ClampError("clamp_from", str(self.start), "it must be a step >= 0 (the first step clamped)")
        if self.until is not None and (isinstance(self.until, bool) or not isinstance(self.until, int)
                                       or self.until <= self.start):
            raise ClampError("clamp_until", str(self.until), f"it must be a step > clamp_from={self.start} (the "
                             "window [clamp_from, clamp_until) would hold no step), or null to clamp to the end")

    def holds(self, step: int) -> bool:
        return self.start <= step and (self.until is None or step < self.until)


def parse_pattern(text: str) -> tuple[int | None, int | None] | None:
    """(layer, head) of ``layer{l}/head{h}``, None standing for ``*``; None when ``text`` is not such a pattern."""
    layer, slash, head = text.partition("/")
    layer_part, head_part = layer.removeprefix("layer"), head.removeprefix("head")
    if not (slash and layer.startswith("layer") and head.startswith("head")):
        return None
    numbers = parse_layer_head(f"layer{0 if layer_part == WILDCARD else layer_part}/"
                               f"head{0 if head_part == WILDCARD else head_part}")
    if numbers is None:
        return None
    return None if layer_part == WILDCARD else numbers[0], None if head_part == WILDCARD else numbers[1]


def shown(patterns: Sequence[str]) -> str:
    return f"[{','.join(patterns)}]"


def resolve(patterns: Sequence[str], heads_by_layer: Mapping[int, int], layers: int,
            no_heads: str = "") -> list[tuple[int, int]]:
    """The (layer, head) pairs the ``patterns`` name, sorted, each once. ``heads_by_layer``: layer -> its heads, for
    the layers whose heads have weights of their own; ``layers``: the model's layers; ``no_heads``: how an error
    says why a layer has none (e.g. ``mixers[1]=simple``). Raises :class:`ClampError` naming the first bad one."""
    value = shown(patterns)
    if patterns and not heads_by_layer:
        raise ClampError("clamp", value, f"{no_heads or 'this model'} has no heads with weights of their own to "
                         "clamp; leave clamp=[]")
    found: set[tuple[int, int]] = set()
    for pattern in patterns:
        parsed = parse_pattern(pattern)
        if parsed is None:
            names = [*(f"layer{layer}/head{WILDCARD}" for layer in heads_by_layer), f"layer{WILDCARD}/head{WILDCARD}",
                     *(layer_head(layer, head) for layer, heads in heads_by_layer.items() for head in range(heads))]
            typed = pattern if "/" in pattern else f"{pattern}/head{WILDCARD}"  # "layer0": its heads, likely
            raise ClampError("clamp", value, f"{pattern!r} is not a head: write layer<l>/head<h>, {WILDCARD} for every "
                             f"layer or head ({EXAMPLE}){did_you_mean(typed, names)}")
        layer, head = parsed
        if layer is not None and layer >= layers:
            raise ClampError("clamp", value, f"{pattern} names layer {layer}, and the model has layers 0..{layers - 1} "
                             f"(layers={layers})")
        if layer is not None and layer not in heads_by_layer:
            raise ClampError("clamp", value, f"{pattern} names layer {layer}, whose heads have no weights of their own"
                             f"{f' ({no_heads})' if no_heads else ''}; clamp a layer among "
                             f"{', '.join(map(str, sorted(heads_by_layer)))}")
        chosen = [layer] if layer is not None else sorted(heads_by_layer)
        for at in chosen:
            heads = heads_by_layer[at]
            if head is not None and head >= heads:
                raise ClampError("clamp", value, f"{pattern} names head {head}, and layer {at} has heads "
                                 f"0..{heads - 1} (heads={heads})")
            found.update((at, h) for h in ([head] if head is not None else range(heads)))
    return sorted(found)


def check_clamp(cfg: Any) -> list[tuple[int, int]]:
    """The clamp knobs of a composed config checked against its model (before the model exists): the window, then
    the patterns; returns the heads they name."""
    Window(cfg.get("clamp_from", 0), cfg.get("clamp_until"))
    patterns = [str(pattern) for pattern in cfg.get("clamp") or ()]
    if not patterns:
        return []
    model = cfg.model
    mixers = [str(name) for name in model.get("mixers") or ()]
    names = mixers or [str(model.name)] * int(model.layers)
    facts = {name: declared_variants(only=name)[name] for name in set(names)}
    heads = {layer: block_heads(model.num_heads, facts[name]) for layer, name in enumerate(names)
             if facts[name].learned_heads}
    others = [f"mixers[{layer}]={name}" for layer, name in enumerate(mixers) if not facts[name].learned_heads]
    no_heads = ", ".join(others) if mixers else f"model={model.name}"
    return resolve(patterns, heads, len(names), no_heads)
