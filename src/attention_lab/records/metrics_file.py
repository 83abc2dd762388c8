"""metrics.json in the order a reader wants it: what the run achieved first, the many per-head values after.

Sorted alphabetically, a default run's file opened with 40 ``ablation/...`` keys and put ``val/seq_acc`` near its
end. Here it opens with the headline, in this order: the final ``val/*`` (then ``ood/*``) metrics as the console's
table shows them, the run's own numbers (``global_step``, ``params``, ``state_size``, ``steps_to_solve``, then the
findings: ``formation_step``, ...), and the knobs (``hparams``); then the loss by target index (index 0 first),
the per-head and per-pair values (head scores, entropies, ablations, patching, composition, copying: sorted by
name), and last the histories (``formation``). The order follows from the names and the order in which the run
produced them: a rerun with the same config and seed writes the same bytes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from attention_lab.analysis.tags import HeadMetric, is_index_tag, parse_composition_tag, parse_copying_tag
from attention_lab.names import natural
from attention_lab.records.files import write_text

SPLITS = ("val/", "ood/")  # the validation sets, in the console table's order
HPARAMS = "hparams"
STEPS_TO_SOLVE = "steps_to_solve"  # the first step at which the run was solved (null: never)


def per_head(name: str) -> bool:
    """A value of one head, layer or pair of heads: a name :mod:`attention_lab.analysis.tags` writes, or another
    with a ``layer{l}`` part (what a variant's module logs of itself, ``gated/gate/layer0/head1``)."""
    return (HeadMetric.parse(name) is not None or parse_composition_tag(name) is not None
            or parse_copying_tag(name) is not None
            or any(part.startswith("layer") and natural(part.removeprefix("layer")) is not None
                   for part in name.split("/")))


def rank(name: str, value: Any, position: int) -> tuple:
    """Where ``name`` (the ``position``-th key the run produced) goes in the file."""
    if is_index_tag(name):
        return 3, natural(name.rpartition("/")[2]) or 0
    if per_head(name):
        return 4, name
    if isinstance(value, (dict, list)):
        return (2, name) if name == HPARAMS else (5, name)
    split = next((number for number, prefix in enumerate(SPLITS) if name.startswith(prefix)), len(SPLITS))
    return (0, split, position) if split < len(SPLITS) else (1, position)


def headline_first(metrics: dict[str, Any]) -> dict[str, Any]:
    """``metrics`` reordered as the module says (the headline keys keep the order the run produced them in)."""
    order = sorted(enumerate(metrics.items()), key=lambda item: rank(item[1][0], item[1][1], item[0]))
    return {name: value for _, (name, value) in order}


def write_metrics(path: Path, metrics: dict[str, Any]) -> None:
    """metrics.json, headline first, replaced atomically."""
    import json

    write_text(path, json.dumps(headline_first(metrics), indent=2) + "\n")
