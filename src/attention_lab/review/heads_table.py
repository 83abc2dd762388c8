"""Which heads matter (``compare.py --heads``): per configuration of a sweep, the detector scores and the ablation
drops of its heads side by side, mean ± sample std over the seeds.

A head's index means nothing across seeds (head 2 of one seed is not head 2 of another), so within each layer of
each run the heads are ranked by a detector score first: ``--heads previous_token,induction`` ranks layer 0 by the
previous-token score and every later layer by the induction score; row "layer 1, #1 by induction" is the top
induction head of layer 1, whichever it is in each seed. The whole layer (``all``) has a row of its own. The
last column says in how many seeds the top-ranked head is also the head whose zero ablation costs the most token
accuracy. The score columns are the kinds given to ``--heads``, in that order."""

from __future__ import annotations

from dataclasses import dataclass

from attention_lab.head_metrics import HeadMetric, ablation_family, score_family
from attention_lab.review.cli import ReviewError
from attention_lab.review.sweep import Job, Sweep, mean_std, seed_groups

DROPS = (("zero", "token_acc"), ("mean", "token_acc"), ("zero", "loss"), ("mean", "loss"))


@dataclass
class HeadRow:
    configuration: str
    layer: int
    rank: int | None  # None: the whole layer
    ranked_by: str
    values: dict[str, list[float]]  # column -> one value per seed
    top_is_most_needed: tuple[int, int] | None = None  # (seeds where it is, seeds) for the rank-1 row


def per_head(job: Job) -> dict[tuple[int, int | None], dict[str, float]]:
    """(layer, head or None) -> family -> value."""
    cells: dict[tuple[int, int | None], dict[str, float]] = {}
    for name, value in job.metrics.items():
        record = HeadMetric.parse(name)
        if record is not None:
            cells.setdefault((record.layer, record.head), {})[record.family] = value
    return cells


def score_kinds(ranking: list[str]) -> list[str]:
    """The score columns: the kinds the heads are ranked by, each once, in the order given."""
    return list(dict.fromkeys(ranking))


def columns(ranking: list[str]) -> list[str]:
    return [score_family(kind) for kind in score_kinds(ranking)] + [ablation_family(how, metric) for how, metric in DROPS]


def ranked_rows(sweep: Sweep, ranking: list[str]) -> list[HeadRow]:
    rows: list[HeadRow] = []
    for group in seed_groups(sweep):
        runs = [per_head(job) for job in group.ok]
        runs = [cells for cells in runs if any(ablation_family("zero", "token_acc") in v for v in cells.values())]
        if not runs:
            continue
        layers = sorted({layer for cells in runs for layer, _ in cells})
        for layer in layers:
            kind = ranking[min(layer, len(ranking) - 1)]
            by_rank: dict[int, dict[str, list[float]]] = {}
            whole: dict[str, list[float]] = {}
            agree = 0
            for cells in runs:
                heads = sorted((h for lay, h in cells if lay == layer and h is not None),
                               key=lambda h: -cells[layer, h].get(score_family(kind), float("-inf")))
                for rank, head in enumerate(heads, start=1):
                    for column in columns(ranking):
                        if column in cells[layer, head]:
                            by_rank.setdefault(rank, {}).setdefault(column, []).append(cells[layer, head][column])
                needed = max(heads, key=lambda h: cells[layer, h].get(ablation_family("zero", "token_acc"), 0.0))
                agree += bool(heads) and heads[0] == needed
                for column, value in cells.get((layer, None), {}).items():
                    whole.setdefault(column, []).append(value)
            for rank in sorted(by_rank):
                rows.append(HeadRow(group.configuration, layer, rank, kind, by_rank[rank],
                                    (agree, len(runs)) if rank == 1 else None))
            rows.append(HeadRow(group.configuration, layer, None, kind, whole))
    if not rows:
        raise ReviewError(f"no job of {sweep.dir} recorded head ablations (metrics.json ablation/...): "
                          "--heads needs runs trained with the ablation on (the default)")
    return rows


def cell(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    mean, std = mean_std([v * scale for v in values])
    if mean is None:
        return "—"
    return f"{mean:.{digits}f}" if std is None else f"{mean:.{digits}f} ± {std:.{digits}f}"


def heads_markdown(sweep: Sweep, ranking: list[str]) -> str:
    """The table in Markdown; accuracy drops in points (percent of the tokens), losses in nats."""
    header = ["configuration", "layer", "head", *[f"{kind} score" for kind in score_kinds(ranking)],
              *[f"{how}: {'token acc drop (points)' if metric == 'token_acc' else 'loss increase'}"
                for how, metric in DROPS], "top head = most needed"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in ranked_rows(sweep, ranking):
        head = "all" if row.rank is None else f"#{row.rank} by {row.ranked_by}"
        values = [cell(row.values.get(score_family(kind), [])) for kind in score_kinds(ranking)]
        values += [cell(row.values.get(ablation_family(how, metric), []), *((100.0, 2) if metric == "token_acc" else (1.0, 3)))
                   for how, metric in DROPS]
        agree = f"{row.top_is_most_needed[0]}/{row.top_is_most_needed[1]} seeds" if row.top_is_most_needed else ""
        n = max((len(v) for v in row.values.values()), default=0)
        lines.append(f"| {row.configuration} (n={n}) | {row.layer} | {head} | " + " | ".join(values) + f" | {agree} |")
    return "\n".join(lines) + "\n"
