"""What the tab points at in a run's head scores and ablation drops: the step they belong to, the head that
scores highest on the run's task kind (the head the tab enlarges first; the kind is read from the run's config by
:mod:`~attention_lab.tensorboard_plugin.run_config`), and the heads whose scores and ablations disagree: a head
that looks essential (it gives most of its attention to the task's pattern) yet costs almost nothing when
removed, because other heads do the same work (redundancy)."""

from __future__ import annotations

from attention_lab.analysis.tags import ABLATIONS, ablation_family, best_head, score_family

REDUNDANT_HEADS_DOCS = "docs/tensorboard.md#redundant-heads"
# What the redundancy line's "Why?" opens to, in the tab and in an offline snapshot (which can link to no docs page):
# the first lines of that docs section.
REDUNDANT_HEADS_WHY = ("A head score says what a head looks like; an ablation says whether the model needs it. When "
                       "several heads do the same work, each stands in for the others: removing one costs nothing, "
                       "removing the whole layer costs much. To find the heads that matter, read the whole layer's "
                       "ablation (the all column), the patching grid where the task has a corruption, or train with "
                       "fewer heads and compare.")
LOOKS_ESSENTIAL = 0.5  # head score: at least half of the head's attention follows the task's pattern
COSTS_NOTHING = 0.01  # token accuracy lost when the head alone is removed: at most one point in a hundred


def pair_with_maps(grids: list[dict], maps_step: int) -> list[dict]:
    """The grids logged at or before the maps of ``maps_step``, each with the step of the model it measured.
    Lightning numbers a scalar logged in validation by the batch the validation follows, so the validation after
    n optimizer steps is logged at n - 1, where the maps of the same model are recorded at n (the trainer's
    global step): a grid logged at ``maps_step - 1`` is shown with the maps' step, and keeps the step it was
    logged at in ``logged_step`` (the point the Scalars tab shows)."""
    return [{**grid, "logged_step": grid["step"], "step": maps_step if grid["step"] == maps_step - 1 else grid["step"]}
            for grid in grids]


def cells_of(grids: list[dict], family: str) -> list[list[float | None]] | None:
    return next((grid["cells"] for grid in grids if grid["family"] == family), None)


def focus(grids: list[dict], kind: str | None) -> dict | None:
    """The head scoring highest on ``kind`` in ``grids`` (as the scores route sends them), or None."""
    cells = cells_of(grids, score_family(kind)) if kind else None
    found = best_head(cells) if cells else None
    if found is None:
        return None
    layer, head = found
    return {"kind": kind, "layer": layer, "head": head, "score": cells[layer][head]}


def redundant_heads(grids: list[dict], kind: str | None) -> list[dict]:
    """The heads scoring at least LOOKS_ESSENTIAL on ``kind`` whose removal (every logged ablation of token
    accuracy) costs at most COSTS_NOTHING; [] when the grids hold no such score or ablation."""
    scores = cells_of(grids, score_family(kind)) if kind else None
    families = [ablation_family(how, "token_acc") for how in ABLATIONS]
    drops = [cells for family in families if (cells := cells_of(grids, family))]
    if not scores or not drops:
        return []
    whole_layer = [grid["whole_layer"] for grid in grids if grid["family"] in families]
    found = []
    for layer, row in enumerate(scores):
        for head, score in enumerate(row):
            costs = [cells[layer][head] for cells in drops if layer < len(cells) and head < len(cells[layer])]
            costs = [cost for cost in costs if cost is not None]
            if score is not None and score >= LOOKS_ESSENTIAL and costs and max(costs) <= COSTS_NOTHING:
                layer_costs = [values[layer] for values in whole_layer
                               if layer < len(values) and values[layer] is not None]
                found.append({"layer": layer, "head": head, "score": score, "drop": max(costs),
                              "layer_drop": max(layer_costs, default=None)})
    return found


def plain(value: float, decimals: int) -> str:
    """``value`` to ``decimals`` places, and a value that rounds to zero as 0 (never -0.000)."""
    text = f"{value:.{decimals}f}"
    return "0" if float(text) == 0 else text


def redundancy_line(heads: list[dict], kind: str) -> str | None:
    """One line saying which heads look essential but are not, or None for none."""
    if not heads:
        return None
    layers = dict.fromkeys(h["layer"] for h in heads)
    named = "; ".join(f"layer {layer} head{'s' if len(ids) > 1 else ''} {', '.join(ids)}" for layer in layers
                      if (ids := [str(h["head"]) for h in heads if h["layer"] == layer]))
    low, high = plain(min(h["score"] for h in heads), 2), plain(max(h["score"] for h in heads), 2)
    whole = [h["layer_drop"] for h in heads if h["layer_drop"] is not None]
    layer_cost = f" (removing the whole layer: {plain(max(whole), 3)})" if whole else ""
    return (f"Scores and ablations disagree: {named} score {low if low == high else f'{low}–{high}'} on {kind} and "
            f"look essential, yet removing any one alone costs at most {plain(max(h['drop'] for h in heads), 3)} of "
            f"token accuracy{layer_cost}: other heads do the same work.")


def annotate(grids: list[dict], maps_step: int | None, kind: str | None) -> dict:
    """The scores route's answer: the grids (paired with the maps' step when one is given), the head to open
    on, and the redundancy line with what explains it (its "Why?") and the docs section that says more."""
    if maps_step is not None:
        grids = pair_with_maps(grids, maps_step)
    heads = redundant_heads(grids, kind)
    return {"grids": grids, "focus": focus(grids, kind), "redundant": heads,
            "redundancy": redundancy_line(heads, kind) if kind else None, "redundancy_docs": REDUNDANT_HEADS_DOCS,
            "redundancy_why": REDUNDANT_HEADS_WHY}
