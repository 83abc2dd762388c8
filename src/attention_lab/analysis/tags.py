"""The tags the lab's measurements are logged under, and back: the one place that turns a per-head measurement
(family, layer, head) and the loss at a target index into the tag that TensorBoard, metrics.json,
``optimized_metric`` and ``compare.py --metric`` use.

Tags: ``<family>/layer{l}/head{h}``, or ``<family>/layer{l}/all`` for a whole layer (ablation and patching only),
with the families

- ``attention_entropy``: mean entropy of the head's attention rows (nats);
- ``head_score/<kind>``: a detector score, kind in :data:`attention_lab.analysis.head_scores.HEAD_SCORE_KINDS` (declared there
  once, with its detector);
- ``ablation/<how>/<metric>``: what switching the head off costs on the validation set
  (:mod:`attention_lab.analysis.ablation`), how in :data:`ABLATIONS`, metric in :data:`ABLATION_METRICS`;
- ``patching/logit_diff``: the fraction of the clean-minus-corrupted logit difference that patching the head's
  clean output into the corrupted run restores (:mod:`attention_lab.analysis.patching`);
- ``attribution/logit_diff``: the same fraction estimated to first order from one gradient, attribution patching
  (:mod:`attention_lab.analysis.attribution`; per head only).
- ``path_patching/logit_diff``: that fraction for one path, sender -> a later head's q/k/v or the logits, tagged
  ``.../layer{a}/head{i}/layer{b}/head{j}/{q,k,v}`` or ``.../logits`` (:mod:`attention_lab.analysis.path_patching`).

The circuit scores of :mod:`attention_lab.analysis.circuits` are named here too: ``composition/<kind>/layer{a}/head{i}/
layer{b}/head{j}`` for a pair of heads and ``circuit/copying/layer{l}/head{h}``.

The loss by target index (:mod:`attention_lab.analysis.loss_by_index`) is ``val/loss_by_index/<i>``: the final
metrics table, the HParams metrics and ``compare.py`` leave these many per-index values out of their columns, and
the review draws them as one heatmap instead.

Light (no torch import): the config checks use it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from attention_lab.analysis.head_scores import HEAD_SCORE_KINDS
from attention_lab.names import natural

__all__ = ["HeadMetric", "tag", "parse_layer_head", "index_tag", "by_index"]

ABLATIONS = ("zero", "mean")  # the head's output set to 0 / to its mean over the validation set
ABLATION_METRICS = ("loss", "token_acc")  # loss: the increase; token_acc: the drop
ENTROPY = "attention_entropy"
PATCHING = "patching/logit_diff"
PATH_PATCHING = "path_patching/logit_diff"  # pair tags, not a HeadMetric family
ATTRIBUTION = "attribution/logit_diff"
WHOLE_LAYER = "all"
COMPOSITIONS = ("q", "k", "v")  # what an earlier head's output may feed in a later head


def score_family(kind: str) -> str:
    return f"head_score/{kind}"


def score_name(kind: str, layer: int, head: int) -> str:
    """A head score's tag, in TensorBoard and metrics.json."""
    return tag(score_family(kind), layer, head)


def ablation_family(how: str, metric: str) -> str:
    return f"ablation/{how}/{metric}"


def composition_prefix(kind: str) -> str:
    return f"composition/{kind}/"


def layer_head(layer: int, head: int) -> str:
    return f"layer{layer}/head{head}"


def parse_layer_head(text: str) -> tuple[int, int] | None:
    """(layer, head) of ``layer{l}/head{h}``, else None."""
    layer, _, head = text.partition("/")
    numbers = natural(layer.removeprefix("layer")), natural(head.removeprefix("head"))
    if layer.startswith("layer") and head.startswith("head") and None not in numbers:
        return numbers
    return None


def composition_tag(kind: str, writer: tuple[int, int], reader: tuple[int, int]) -> str:
    """How much ``writer`` (layer, head) feeds ``reader``'s queries, keys or values (kind in COMPOSITIONS)."""
    return f"{composition_prefix(kind)}{layer_head(*writer)}/{layer_head(*reader)}"


def parse_composition_tag(tag: str) -> tuple[str, tuple[int, int], tuple[int, int]] | None:
    """(kind, writer, reader) of a :func:`composition_tag`, else None."""
    for kind in COMPOSITIONS:
        if tag.startswith(prefix := composition_prefix(kind)):
            parts = tag.removeprefix(prefix).split("/")
            writer, reader = parse_layer_head("/".join(parts[:2])), parse_layer_head("/".join(parts[2:]))
            return (kind, writer, reader) if len(parts) == 4 and writer and reader else None
    return None


COPYING_PREFIX = "circuit/copying/"


def copying_tag(layer: int, head: int) -> str:
    return f"{COPYING_PREFIX}{layer_head(layer, head)}"


def parse_copying_tag(tag: str) -> tuple[int, int] | None:
    """(layer, head) of a :func:`copying_tag`, else None."""
    return parse_layer_head(tag.removeprefix(COPYING_PREFIX)) if tag.startswith(COPYING_PREFIX) else None


PATH_DIRECT = "logits"  # the last part of a sender's direct path's tag: no receiver head
Head = tuple[int, int]  # (layer, head)
Column = tuple[Head | None, str]  # a path grid's column: (receiver, kind), or (None, PATH_DIRECT), the logits


@dataclass(frozen=True)
class PathTag:
    """One path patching value: ``sender`` -> ``receiver``'s ``kind`` input (in COMPOSITIONS), or -> the logits
    (``receiver`` None, ``kind`` PATH_DIRECT)."""

    sender: Head
    receiver: Head | None = None
    kind: str = PATH_DIRECT

    @property
    def tag(self) -> str:
        receiver = "" if self.receiver is None else f"{layer_head(*self.receiver)}/"
        return f"{PATH_PATCHING}/{layer_head(*self.sender)}/{receiver}{self.kind}"

    @classmethod
    def parse(cls, tag: str) -> PathTag | None:
        """The record of a path tag, or None for any other name."""
        if not tag.startswith(f"{PATH_PATCHING}/"):
            return None
        parts = tag.removeprefix(f"{PATH_PATCHING}/").split("/")
        sender, receiver = parse_layer_head("/".join(parts[:2])), parse_layer_head("/".join(parts[2:4]))
        if sender and parts[2:] == [PATH_DIRECT]:
            return cls(sender)
        if sender and receiver and len(parts) == 5 and parts[4] in COMPOSITIONS:
            return cls(sender, receiver, parts[4])
        return None


def path_grid(metrics: Mapping[str, float]) -> tuple[list[Head], list[Column], list[list[float]]] | None:
    """The logged path values as a senders x receiver inputs grid: (the senders, sorted; the columns, (receiver,
    kind) in the receivers' order with their q, k, v, then (None, PATH_DIRECT), the logits; the cells, NaN where no
    path was logged, as from a head to one in its own or an earlier layer), or None when none is logged."""
    found = {record: float(value) for name, value in metrics.items() if (record := PathTag.parse(name)) is not None}
    if not found:
        return None
    senders = sorted({record.sender for record in found})
    columns: list[Column] = sorted(
        {(record.receiver, record.kind) for record in found if record.receiver is not None},
        key=lambda column: (column[0], COMPOSITIONS.index(column[1])))
    if any(record.receiver is None for record in found):
        columns.append((None, PATH_DIRECT))
    cells = [[found.get(PathTag(sender, *column), math.nan) for column in columns] for sender in senders]
    return senders, columns, cells


FAMILIES = (ENTROPY, *(score_family(k) for k in HEAD_SCORE_KINDS),
            *(ablation_family(h, m) for h in ABLATIONS for m in ABLATION_METRICS), PATCHING, ATTRIBUTION)
WHOLE_LAYER_FAMILIES = tuple(f for f in FAMILIES if f.startswith("ablation/") or f == PATCHING)


@dataclass(frozen=True)
class HeadMetric:
    """One measurement of one head (``head=None``: of the whole layer)."""

    family: str
    layer: int
    head: int | None

    @property
    def tag(self) -> str:
        if self.head is None:
            return f"{self.family}/layer{self.layer}/{WHOLE_LAYER}"
        return f"{self.family}/{layer_head(self.layer, self.head)}"

    @classmethod
    def parse(cls, tag: str) -> HeadMetric | None:
        """The record of a tag this module writes, or None for any other name."""
        family, _, rest = tag.rpartition("/layer")
        if family not in FAMILIES:
            return None
        text, _, head = rest.partition("/")
        if head == WHOLE_LAYER and family in WHOLE_LAYER_FAMILIES:
            layer = natural(text)
            return None if layer is None else cls(family, layer, None)
        found = parse_layer_head(f"layer{rest}")
        return None if found is None else cls(family, *found)


def tag(family: str, layer: int, head: int | None) -> str:
    """The tag a per-head value is logged under: ``<family>/layer{l}/head{h}`` (``head=None``: ``.../all``)."""
    return HeadMetric(family, layer, head).tag


def grid(metrics: Mapping[str, float], family: str) -> list[list[float]] | None:
    """The logged values of one family as a layers x heads grid (NaN where missing; whole-layer values left
    out), or None when none is logged."""
    cells: dict[tuple[int, int], float] = {}
    for name, value in metrics.items():
        record = HeadMetric.parse(name)
        if record is not None and record.family == family and record.head is not None:
            cells[record.layer, record.head] = float(value)
    if not cells:
        return None
    layers, heads = max(layer for layer, _ in cells) + 1, max(h for _, h in cells) + 1
    return [[cells.get((layer, h), math.nan) for h in range(heads)] for layer in range(layers)]


def score_grid(metrics: Mapping[str, float], kind: str) -> list[list[float]] | None:
    """The logged ``head_score/<kind>/layer{l}/head{h}`` values as a layers x heads grid (NaN where missing),
    or None when none is logged."""
    return grid(metrics, score_family(kind))


def best_head(cells: list[list[float | None]]) -> tuple[int, int] | None:
    """(layer, head) of the highest value of a layers x heads grid (None and NaN cells left out; the first
    such head on a tie), or None when no cell holds a number."""
    found = [(value, -layer, -head) for layer, row in enumerate(cells) for head, value in enumerate(row)
             if value is not None and not math.isnan(value)]
    if not found:
        return None
    _, layer, head = max(found)
    return -layer, -head


def layer_values(metrics: Mapping[str, float], family: str) -> dict[int, float]:
    """The whole-layer values of one family: layer -> value."""
    values = {}
    for name, value in metrics.items():
        record = HeadMetric.parse(name)
        if record is not None and record.family == family and record.head is None:
            values[record.layer] = float(value)
    return values


LOSS_BY_INDEX = "val/loss_by_index"


def index_tag(index: int) -> str:
    """The tag of the validation loss at target index ``index``."""
    return f"{LOSS_BY_INDEX}/{index}"


def is_index_tag(name: str) -> bool:
    head, _, index = name.rpartition("/")
    return head == LOSS_BY_INDEX and natural(index) is not None


def by_index(metrics: Mapping[str, float]) -> list[float | None]:
    """The logged loss at each target index, index 0 first, None where none was logged (an empty list: none)."""
    found = {int(name.rpartition("/")[2]): float(value) for name, value in metrics.items() if is_index_tag(name)}
    return [found.get(index) for index in range(max(found) + 1)] if found else []
