"""The combinations of a sweep's product that were not run, as the sweep summary records them (``folded``): each
trains the same run as an earlier job (``-m model=self,multihead heads=1,2``: ``self`` has one head)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from attention_lab.records.files import SUMMARY
from attention_lab.review.records import Unreadable, load_json, shown, strings, text


@dataclass
class Folded:
    """A combination of the sweep's product that was not run: job ``into`` trains the same run."""

    overrides: list[str]
    into: str
    reason: str

    def moved(self, sweep: str) -> Folded:
        """The fold as a folder above its sweep names it: job ``<sweep>/<into>`` (``sweep`` "." is the folder itself)."""
        return self if sweep == "." else Folded(self.overrides, f"{sweep}/{self.into}", self.reason)

    def line(self, common: list[str]) -> str:
        configuration = " ".join(o for o in self.overrides if o not in common) or "(defaults)"
        return f"folded: {configuration} into job {self.into}: {self.reason}"


def load_folds(sweep_dir: Path, unreadable: Unreadable) -> list[Folded]:
    """``sweep_summary.json``'s ``folded`` entries (none in the summary a new sweep's dir is claimed with, before its first job ends)."""
    path = sweep_dir / SUMMARY
    folds = load_json(path, unreadable).get("folded") or []
    if not isinstance(folds, list):
        unreadable.add(path, f"folded is {shown(folds)}, not a list; ignored")
        return []
    kept = []
    for n, entry in enumerate(folds):
        into = entry.get("into") if isinstance(entry, dict) else None
        if not isinstance(entry, dict) or isinstance(into, bool) or not isinstance(into, int):
            unreadable.add(path, f"folded[{n}] is {shown(entry)}, not a fold; ignored")
            continue
        kept.append(Folded(strings(entry.get("overrides"), f"folded[{n}].overrides", path, unreadable), str(into),
                           text(entry, "reason", path, unreadable, f"folded[{n}].") or ""))
    return kept
