"""The results for people (rich tables, Markdown for docs/benchmarks.md) and for files (a JSON path that is
never reused)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from benchmarks.rows import Row

SECTIONS = ("A", "B", "C", "D", "E")


def unique_json_path(out_dir: Path) -> Path:
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S-%f")
    path, n = out_dir / f"{stamp}.json", 1
    while path.exists():
        path, n = out_dir / f"{stamp}-{n}.json", n + 1
    return path


def fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "%":
        return f"{value:+.1f} %"
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "MiB":
        return f"{value:,.0f} MiB" if value >= 10 else f"{value:.1f} MiB"
    if unit == "ms":
        return f"{value:,.1f} ms" if value >= 10 else f"{value:.2f} ms"
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "":
        return f"{value:.2f}"
    return f"{value:.1f} {unit}"


def ok_mark(ok: bool | None) -> str:
    return "" if ok is None else ("[green]pass[/]" if ok else "[red]MISS[/]")


def cells(r: Row) -> tuple[str, str, str, str, str]:
    """name, value, ratio, GFLOP/s, note (with the target and whether it is met)."""
    ratio = f"{r.ratio:.2f}x {r.ratio_to}" if r.ratio is not None else ""
    gflops = f"{r.gflops:.1f}" if r.gflops is not None else ""
    note = (f"target {r.target} {ok_mark(r.ok)}" + (f"; {r.note}" if r.note else "")) if r.target else r.note
    return r.name, fmt(r.value, r.unit), ratio, gflops, note


def section_table(title: str, rows: Sequence[Row]) -> object:
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_lines=False)
    for column, justify in (("benchmark", "left"), ("value", "right"), ("ratio", "right"), ("GFLOP/s", "right"),
                            ("note", "left")):
        table.add_column(column, justify=justify)
    for r in rows:
        table.add_row(*cells(r))
    return table


def targets_table(rows: Sequence[Row]) -> object:
    from rich.table import Table

    table = Table(title="Targets", title_justify="left")
    for column in ("section", "target", "measured", "wanted", "", "note"):
        table.add_column(column)
    for r in rows:
        table.add_row(r.section, r.name, fmt(r.value, r.unit), r.target, ok_mark(r.ok), r.note)
    return table


def markdown(rows: Sequence[Row], targets: Sequence[Row]) -> str:
    """The results as Markdown tables, one per section, then the targets."""
    def clean(text: str) -> str:
        return text.replace("|", "\\|").replace("[green]", "").replace("[red]", "").replace("[/]", "")

    out = []
    for section in SECTIONS:
        section_rows = [r for r in rows if r.section == section]
        if not section_rows:
            continue
        out += ["", f"**{section}**", "", "| benchmark | value | ratio | GFLOP/s | note |", "|---|---:|---:|---:|---|"]
        out += ["| " + " | ".join(clean(c) for c in cells(r)) + " |" for r in section_rows]
    if targets:
        out += ["", "| target | measured | wanted | | note |", "|---|---:|---|---|---|"]
        out += [f"| {r.section}: {clean(r.name)} | {fmt(r.value, r.unit)} | {r.target} | {clean(ok_mark(r.ok))} | "
                f"{clean(r.note)} |" for r in targets]
    return "\n".join(out)
