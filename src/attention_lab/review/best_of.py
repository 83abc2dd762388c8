"""A setting a sweep varies only to pick its best value per cell, folded: Zoology reports each mixer at each width
with the best of four learning rates (``-m ... lr=a,b,c,d``, then ``--best-of lr``). Of the seed groups that differ
only in that setting, the one whose mean of the metric is best stands for the cell (its point, its row) and says
which value it is; the values whose seeds do not separate them from it (:mod:`attention_lab.review.separation`) are
named beside it, so that a value is called the best only when its seeds say so. No torch import."""

from __future__ import annotations

from dataclasses import dataclass, field

from attention_lab.errors import ReviewError
from attention_lab.review.compare import group_rows, markdown_table
from attention_lab.review.separation import leading, spread
from attention_lab.review.sweep import Group, Sweep


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
    rivals: list[str] = field(default_factory=list)  # values the seeds do not separate from the winner
    seeds: int = 0  # the fewest seeds of the winner and its rivals

    def named(self, key: str) -> str:
        """``lr=0.003, best of 4``, or, when seeds do not separate it, ``lr=0.003, highest mean of 4, not separated
        from lr=0.01 by 2 seeds``."""
        if not self.rivals:
            return f"{key}={self.winner}, best of {self.tried}"
        rivals = ", ".join(f"{key}={value}" for value in self.rivals)
        seeds = f"{self.seeds} seed{'s' if self.seeds != 1 else ''}"
        return f"{key}={self.winner}, highest mean of {self.tried}, not separated from {rivals} by {seeds}"

    def cell(self) -> str:
        """The winner as the table's cell: ``0.003``, or ``0.003 (not separated from 0.01)``."""
        if self.winner is None:
            return "—"
        return self.winner if not self.rivals else f"{self.winner} (not separated from {', '.join(self.rivals)})"


def cell_key(group: Group, key: str) -> tuple[str, ...]:
    return tuple(sorted(o for o in group.overrides if o.partition("=")[0].lstrip("+") != key))


def best_of(groups: list[Group], key: str, metric: str, direction: str = "maximize") -> list[Best]:
    """One Best per cell (the groups equal but for ``key``), in the order of each cell's first group. Equal means
    go to the earlier group; ``direction`` is the sweep's (maximize or minimize)."""
    cells: dict[tuple[str, ...], list[Group]] = {}
    for group in groups:
        cells.setdefault(cell_key(group, key), []).append(group)
    folded = []
    for cell in cells.values():
        spreads = {n: s for n, group in enumerate(cell) if (s := spread(group.values(metric))) is not None}
        if not spreads:
            folded.append(Best(cell[0], None, 0, len(cell)))
            continue
        lead = leading(spreads, direction)
        best = cell[lead[0]]
        folded.append(Best(best, setting(best, key), len(spreads), len(cell),
                           [setting(cell[n], key) or "—" for n in lead[1:]], min(spreads[n].n for n in lead)))
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
        out.append([configuration or "(defaults)", best.cell(), f"{best.tried} of {best.values}", *row[1:]])
    return ["cell", key, "tried", *header[1:]], out


def best_markdown(sweep: Sweep, cells: list[Best], key: str) -> str:
    header, rows = best_rows(sweep, cells, key)
    lines = [f"## Best of `{key}`", "",
             f"Each cell (the jobs equal but for `{key}` and `seed`) is the value of `{key}` with the best mean "
             f"{sweep.metric} ({sweep.direction}); mean ± sample std (n) over its seeds. A value whose seeds do not "
             f"separate it from that one (means closer than the larger std, or one seed) is named beside it: "
             f"the seeds do not say which of them is the best.", "",
             *markdown_table(header, rows, overrides_column=0)]
    return "\n".join(lines) + "\n"
