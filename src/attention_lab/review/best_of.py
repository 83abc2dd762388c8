"""A setting a sweep varies only to pick its best value per cell, folded: Zoology reports each mixer at each width
with the best of four learning rates (``-m ... lr=a,b,c,d``, then ``--best-of lr``). Of the seed groups that differ
only in that setting, the one whose mean of the metric is best stands for the cell and says which value won. No
torch import."""

from __future__ import annotations

from dataclasses import dataclass

from attention_lab.review.cli import ReviewError
from attention_lab.review.compare import group_rows, markdown_table
from attention_lab.review.sweep import Group, Sweep, mean_std


def setting(group: Group, key: str) -> str | None:
    """The value ``key=value`` takes in the group's overrides (``+key``, ``++key`` too), or None."""
    for override in group.overrides:
        name, sep, value = override.partition("=")
        if sep and name.lstrip("+") == key:
            return value
    return None


@dataclass
class Best:
    group: Group  # the seed group that stands for the cell
    winner: str | None  # its value of the folded setting; None when no value of the cell has an ok job
    tried: int  # values of the setting with a mean (an ok job reporting the metric)
    values: int  # values of the setting the cell ran


def cell_key(group: Group, key: str) -> tuple[str, ...]:
    return tuple(sorted(o for o in group.overrides if o.partition("=")[0].lstrip("+") != key))


def best_of(groups: list[Group], key: str, metric: str, direction: str = "maximize") -> list[Best]:
    """One Best per cell (the groups equal but for ``key``), in the order of each cell's first group. Ties go to
    the earlier group; ``direction`` is the sweep's (maximize or minimize)."""
    cells: dict[tuple[str, ...], list[Group]] = {}
    for group in groups:
        cells.setdefault(cell_key(group, key), []).append(group)
    sign = 1.0 if direction == "maximize" else -1.0
    folded = []
    for cell in cells.values():
        scored = [(mean, group) for group in cell if (mean := mean_std(group.values(metric))[0]) is not None]
        if not scored:
            folded.append(Best(cell[0], None, 0, len(cell)))
            continue
        best = max(scored, key=lambda pair: sign * pair[0])[1]  # max keeps the first of equal means
        folded.append(Best(best, setting(best, key), len(scored), len(cell)))
    return folded


def checked_setting(groups: list[Group], key: str) -> None:
    """Raises ReviewError naming the settings there are when no group sets ``key``."""
    if not any(setting(g, key) is not None for g in groups):
        raise ReviewError(f"{key} is not a setting this sweep varies or sets: choose among "
                          f"{', '.join(sorted({o.split('=')[0].lstrip('+') for g in groups for o in g.overrides}))}")


def best_rows(sweep: Sweep, cells: list[Best], key: str) -> tuple[list[str], list[list[str]]]:
    """compare.py --best-of: one row per cell, its configuration without ``key``, the winning value and how many
    values had a result, then the winner's seed statistics (the columns of the "Seeds" table)."""
    header, rows = group_rows(sweep, [c.group for c in cells])
    out = []
    for best, row in zip(cells, rows, strict=True):
        configuration = " ".join(o for o in best.group.overrides
                                 if o.partition("=")[0].lstrip("+") != key and o not in sweep.common_overrides)
        out.append([configuration or "(defaults)", best.winner or "—", f"{best.tried} of {best.values}", *row[1:]])
    return ["cell", key, "tried", *header[1:]], out


def best_markdown(sweep: Sweep, cells: list[Best], key: str) -> str:
    header, rows = best_rows(sweep, cells, key)
    lines = [f"## Best of `{key}`", "",
             f"Each cell (the jobs equal but for `{key}` and `seed`) is the value of `{key}` with the best mean "
             f"{sweep.metric} ({sweep.direction}); mean ± sample std (n) over its seeds.", "",
             *markdown_table(header, rows, overrides_column=0)]
    return "\n".join(lines) + "\n"
