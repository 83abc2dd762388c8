"""Recompute every worked example of the reference notebooks with the attention library.

Prints, per notebook, the notebook's number beside ours and ✓/✗; exits 1 on any mismatch.

    python scripts/reproduce.py                 # all five notebooks
    python scripts/reproduce.py --notebook 001  # one of them
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from rich.console import Console
from rich.table import Table

from attention_lab.notebooks import NOTEBOOKS, Comparison, Example, compare_all

MAX_CHARS = 24  # numbers shown per cell before "…"


def format_number(x: float, example: Example) -> str:
    if example.decimals is None:
        return str(int(x)) if float(x).is_integer() else repr(float(x))
    if example.scientific:
        return f"{x:.{example.decimals}e}"
    return f"{x:.{example.decimals}f}"


def compact(values: np.ndarray, example: Example) -> str:
    """The first few numbers (about MAX_CHARS of them), then the shape: '1.0100 1.0641 0.2040 … (3×2)'."""
    flat = values.ravel()
    shown: list[str] = []
    for x in flat:
        text = format_number(x, example)
        if shown and len(" ".join([*shown, text])) > MAX_CHARS:
            break
        shown.append(text)
    text = " ".join(shown)
    if len(shown) < flat.size:
        text += " …"
    if values.ndim:
        text += f" ({'×'.join(map(str, values.shape))})"
    return text


def table_for(notebook: str, comparisons: list[Comparison]) -> Table:
    table = Table(title=f"{notebook}: {NOTEBOOKS[notebook]}", title_justify="left")
    table.add_column("example", no_wrap=True)
    table.add_column("notebook", no_wrap=True)
    table.add_column("ours", no_wrap=True)
    table.add_column("max |Δ|", justify="right", no_wrap=True)
    table.add_column("", justify="center", no_wrap=True, min_width=1)
    for c in comparisons:
        mark = "[green]✓[/green]" if c.ok else "[bold red]✗[/bold red]"
        table.add_row(c.example.name, compact(c.expected, c.example), compact(c.ours, c.example),
                      f"{c.max_error:.1e}", mark)
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notebook", choices=sorted(NOTEBOOKS), help="only this notebook (default: all)")
    args = parser.parse_args(argv)

    comparisons = compare_all(args.notebook)
    console = Console()
    if not console.is_terminal:
        console.width = max(console.width, 140)  # piped or captured: don't squeeze the tables to 80 columns
    for notebook in sorted(NOTEBOOKS):
        rows = [c for c in comparisons if c.example.notebook == notebook]
        if rows:
            console.print(table_for(notebook, rows))
    failed = [c.example.name for c in comparisons if not c.ok]
    passed = len(comparisons) - len(failed)
    if failed:
        console.print(f"[bold red]✗ {len(failed)} of {len(comparisons)} examples differ:[/bold red] {', '.join(failed)}")
        return 1
    console.print(f"[green]✓ all {passed} examples match the notebooks[/green]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
