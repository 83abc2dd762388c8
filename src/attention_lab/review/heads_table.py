"""Which heads matter (``compare.py --heads``): per configuration of a sweep, the detector scores, the ablation
drops and the activation patching of its heads side by side, mean ± sample std over the seeds.

A head's index means nothing across seeds (head 2 of one seed is not head 2 of another), so within each layer of
each run the heads are ranked by a detector score first: ``--heads previous_token,induction`` ranks layer 0 by the
previous-token score and every later layer by the induction score; row "layer 1, #1 by induction" is the top
induction head of layer 1, whichever it is in each seed. The whole layer (``all``) has a row of its own. The
last two columns say in how many seeds the top-ranked head is also the head whose zero ablation costs the most
token accuracy, and the head whose patching restores the most; a seed where the top-ranked head shares the
largest value with other heads (two heads costing one token each) is a tie, not an agreement, and is listed with
its heads. The score columns are the kinds given to ``--heads``, in that order."""

from __future__ import annotations

from dataclasses import dataclass, field

from attention_lab.analysis.tags import PATCHING, HeadMetric, ablation_family, score_family
from attention_lab.errors import ReviewError
from attention_lab.review.sweep import Job, Sweep, mean_std, seed_groups, seed_of

DROPS = (("zero", "token_acc"), ("mean", "token_acc"), ("zero", "loss"), ("mean", "loss"))
# What the top-ranked head is compared with (the last columns' headers): the family whose largest value marks the
# head the model needs most.
NEEDED = {"most needed (zero ablation)": ablation_family("zero", "token_acc"), "restores most (patching)": PATCHING}


@dataclass
class Agreement:
    """Of ``seeds`` seeds, in how many the top-ranked head alone has the largest value (``agree``), and the ties:
    one entry per seed where it shares that value with other heads (``seed 3: h0, h2``)."""

    agree: int = 0
    seeds: int = 0
    ties: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        if not self.seeds:
            return ""
        ties = f"; tie: {' / '.join(self.ties)}" if self.ties else ""
        return f"{self.agree}/{self.seeds} seeds{ties}"


@dataclass
class HeadRow:
    configuration: str
    layer: int
    rank: int | None  # None: the whole layer
    ranked_by: str
    values: dict[str, list[float]]  # column -> one value per seed
    agreements: dict[str, Agreement] | None = None  # NEEDED's keys -> the rank-1 row's agreement


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
    return ([score_family(kind) for kind in score_kinds(ranking)]
            + [ablation_family(how, metric) for how, metric in DROPS] + [PATCHING])


def largest(cells: dict[tuple[int, int | None], dict[str, float]], layer: int, heads: list[int],
            family: str) -> list[int]:
    """The heads of ``layer`` that share the largest value of ``family`` (several: a tie); [] if none has one."""
    values = {h: cells[layer, h][family] for h in heads if family in cells[layer, h]}
    best = max(values.values(), default=None)
    return [h for h in heads if h in values and values[h] == best]


def compare_top(agreement: Agreement, top: int, found: list[int], seed: str) -> None:
    """Counts one seed: the top-ranked head ``top`` against the heads with the largest value, ``found``."""
    if not found:
        return
    agreement.seeds += 1
    if found == [top]:
        agreement.agree += 1
    elif top in found:
        agreement.ties.append(f"{seed}: {', '.join(f'h{h}' for h in found)}")


def ranked_rows(sweep: Sweep, ranking: list[str]) -> list[HeadRow]:
    rows: list[HeadRow] = []
    for group in seed_groups(sweep):
        runs = [(f"seed {seed}" if (seed := seed_of(job)) else f"job {job.id}", per_head(job)) for job in group.ok]
        runs = [(seed, cells) for seed, cells in runs
                if any(family in v for v in cells.values() for family in NEEDED.values())]
        if not runs:
            continue
        layers = sorted({layer for _, cells in runs for layer, _ in cells})
        for layer in layers:
            kind = ranking[min(layer, len(ranking) - 1)]
            by_rank: dict[int, dict[str, list[float]]] = {}
            whole: dict[str, list[float]] = {}
            agreements = {name: Agreement() for name in NEEDED}
            for seed, cells in runs:
                heads = sorted((h for lay, h in cells if lay == layer and h is not None),
                               key=lambda h: -cells[layer, h].get(score_family(kind), float("-inf")))
                for rank, head in enumerate(heads, start=1):
                    for column in columns(ranking):
                        if column in cells[layer, head]:
                            by_rank.setdefault(rank, {}).setdefault(column, []).append(cells[layer, head][column])
                for name, family in NEEDED.items():
                    if heads:
                        compare_top(agreements[name], heads[0], largest(cells, layer, heads, family), seed)
                for column, value in cells.get((layer, None), {}).items():
                    whole.setdefault(column, []).append(value)
            for rank in sorted(by_rank):
                rows.append(HeadRow(group.configuration, layer, rank, kind, by_rank[rank],
                                    agreements if rank == 1 else None))
            rows.append(HeadRow(group.configuration, layer, None, kind, whole))
    if not rows:
        raise ReviewError(f"no job of {sweep.dir} recorded head ablations or patching (metrics.json ablation/..., "
                          "patching/...): --heads needs runs trained with the ablation on (the default)")
    return rows


def cell(values: list[float], scale: float = 1.0, digits: int = 2) -> str:
    mean, std = mean_std([v * scale for v in values])
    if mean is None:
        return "—"
    return f"{mean:.{digits}f}" if std is None else f"{mean:.{digits}f} ± {std:.{digits}f}"


def heads_markdown(sweep: Sweep, ranking: list[str]) -> str:
    """The table in Markdown; accuracy drops in points (percent of the tokens), losses in nats, patching as the
    fraction of the logit difference restored."""
    header = ["configuration", "layer", "head", *[f"{kind} score" for kind in score_kinds(ranking)],
              *[f"{how}: {'token acc drop (points)' if metric == 'token_acc' else 'loss increase'}"
                for how, metric in DROPS], "patching: logit diff restored",
              *[f"top head = {name}" for name in NEEDED]]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for row in ranked_rows(sweep, ranking):
        head = "all" if row.rank is None else f"#{row.rank} by {row.ranked_by}"
        values = [cell(row.values.get(score_family(kind), [])) for kind in score_kinds(ranking)]
        values += [cell(row.values.get(ablation_family(how, metric), []), *((100.0, 2) if metric == "token_acc" else (1.0, 3)))
                   for how, metric in DROPS]
        values.append(cell(row.values.get(PATCHING, [])))
        values += [str(row.agreements[name]) if row.agreements else "" for name in NEEDED]
        n = max((len(v) for v in row.values.values()), default=0)
        lines.append(f"| {row.configuration} (n={n}) | {row.layer} | {head} | " + " | ".join(values) + " |")
    return "\n".join(lines) + "\n"
