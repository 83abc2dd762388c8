"""A metric of a sweep against one swept setting, one line per value of another, with error bars over seeds:
the shape of Zoology's Figure 2 (accuracy against d_model, one line per mixer). Built from the seed groups of
:mod:`attention_lab.review.sweep` (jobs that differ only in ``seed``); no torch import. Drawn by
:mod:`attention_lab.plotting.lines`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attention_lab.errors import ReviewError
from attention_lab.review.best_of import Best, best_of, checked_setting, setting
from attention_lab.review.sweep import Group, Sweep, mean_std, seed_groups

# Settings that are not overrides but facts every job records: x may be one of them (the recurrent state size).
RECORDED = {"state_size": "state size per layer (numbers)"}


@dataclass
class Point:
    x: float
    mean: float
    std: float | None  # sample std over the seeds; None with one seed
    n: int  # ok jobs averaged
    total: int  # jobs of the configuration, failed ones included
    note: str = ""  # with --best-of: the value that won ("lr=0.003"), and how many were tried


def number(text: str, key: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ReviewError(f"--x {key} is invalid for this sweep: its value {text!r} is not a number") from None


def x_of(group: Group, x: str) -> str | None:
    """The group's x: its override, or (``state_size``) what its ok jobs recorded."""
    if x in RECORDED:
        recorded = {j.state_size for j in group.ok if j.state_size is not None}
        return str(min(recorded)) if recorded else None
    return setting(group, x)


def series(sweep: Sweep, x: str, line: str, metric: str, best: str | None = None) -> dict[str, list[Point]]:
    """line value -> its points, sorted by x; a configuration with no ok job has no point. With ``best`` (a
    setting, e.g. lr), the groups that differ only in it count as one cell: its best mean of ``metric``."""
    groups = seed_groups(sweep)
    for key in (line, *(k for k in (x, best) if k and k not in RECORDED)):
        checked_setting(groups, key)
    cells = best_of(groups, best, metric, sweep.direction) if best else [Best(g, None, 0, 1) for g in groups]
    lines: dict[str, list[Point]] = {}
    for cell in cells:
        group = cell.group
        line_value = setting(group, line)
        if line_value is None:
            continue
        points = lines.setdefault(line_value, [])
        mean, std = mean_std(group.values(metric))
        x_value = x_of(group, x)
        if mean is not None and x_value is not None:
            note = cell.named(best) if best else ""
            points.append(Point(number(x_value, x), mean, std, len(group.values(metric)), group.total, note))
    if not any(lines.values()):
        raise ReviewError(f"no ok job of {sweep.dir} reports {metric}: choose another --metric or wait for the jobs")
    return {name: sorted(points, key=lambda p: p.x) for name, points in lines.items()}


def cell(point: Point | None) -> str:
    if point is None:
        return "—"
    spread = f" ± {point.std:.3f}" if point.std is not None else ""
    count = f"n={point.n}" if point.n == point.total else f"n={point.n} of {point.total}"
    note = f", {point.note}" if point.note else ""
    return f"{point.mean:.3f}{spread} ({count}{note})"


def to_markdown(lines: dict[str, list[Point]], x: str, line: str, metric: str) -> str:
    """One row per line, one column per x: mean ± std (n)."""
    xs = sorted({p.x for points in lines.values() for p in points})
    header = [f"{line} \\ {x}", *(f"{v:g}" for v in xs)]
    rows = [[f"`{name}`", *(cell(next((p for p in points if p.x == v), None)) for v in xs)]
            for name, points in lines.items()]
    table = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    table += ["| " + " | ".join(row) + " |" for row in rows]
    return f"{metric}, mean ± std over seeds\n\n" + "\n".join(table) + "\n"


def line_plot(lines: dict[str, list[Point]], x: str, line: str, metric: str, path: Path, title: str) -> Path:
    """A PNG: metric against x, one line per value of ``line``, error bars = std over seeds
    (:func:`attention_lab.plotting.lines.save_line_plot`)."""
    from attention_lab.plotting.lines import Series, save_line_plot  # matplotlib: imported by the commands that draw

    series = [Series(f"{line}={name}", [p.x for p in points], [p.mean for p in points], [p.std or 0.0 for p in points])
              for name, points in lines.items() if points]
    # A recorded x (state sizes) has too many values to label each: the log axis's ticks
    return save_line_plot(series, path, xlabel=RECORDED.get(x, x), ylabel=f"{metric} (mean ± std over seeds)",
                          title=title, tick_every_x=x not in RECORDED, fraction=metric.endswith("acc"))
