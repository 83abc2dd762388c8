"""Which sweeps a folder holds, and whether their jobs can be compared as one table.

``compare.py outputs/multirun/<date>`` finds the jobs of every sweep run that day. Each job belongs to the nearest
folder above it that holds a sweep's records (``multirun.yaml`` or ``sweep_summary.json``). Jobs of several
sweeps are pooled when the sweeps set the same settings on their command lines, whatever the values
(``-m heads=1,2`` one morning, ``-m heads=4,8`` later, or the same configurations again with other seeds): pooling
then only adds rows, and the review says which sweeps it pooled, in one line. Sweeps that set different settings
(one of ``heads``, another of ``lr``) would set side by side jobs nobody meant to compare: refused in one line that
names each sweep, its command line, and how to review one. ``seed`` is left aside: repeats are what pooling is for.
No torch import.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from attention_lab.errors import ReviewError
from attention_lab.records.files import MULTIRUN_RECORD, SUMMARY

SEED = "seed"  # varied by repeats of one configuration: never a reason to refuse


def sweep_root(job_dir: Path, top: Path) -> Path:
    """The nearest folder above ``job_dir``, up to ``top``, holding a sweep's records; ``top`` when none does."""
    for folder in job_dir.parents:
        if folder == top or not folder.is_relative_to(top):
            return top
        if (folder / MULTIRUN_RECORD).is_file() or (folder / SUMMARY).is_file():
            return folder
    return top


def by_sweep(top: Path, job_dirs: Iterable[Path]) -> dict[Path, list[Path]]:
    """The job dirs by the sweep they belong to, in the order of each sweep's first job."""
    sweeps: dict[Path, list[Path]] = {}
    for job_dir in job_dirs:
        sweeps.setdefault(sweep_root(job_dir, top), []).append(job_dir)
    return sweeps


def override_key(override: str) -> str:
    return override.partition("=")[0].lstrip("+~")


def settings(jobs: Iterable[list[str]]) -> frozenset[str]:
    """The settings a sweep's jobs set on the command line (the sweep's own, each job with one of its values), but
    seed."""
    return frozenset(key for job in jobs for o in job if (key := override_key(o)) != SEED)


def named(top: Path, root: Path, command: list[str]) -> str:
    name = root.relative_to(top).as_posix() if root != top else "."
    return f"{name} ({' '.join(command)})" if command else name


def pooling(top: Path, overrides: Mapping[Path, list[list[str]]], commands: Mapping[Path, list[str]]) -> str:
    """With one sweep, "". With several that set the same settings: the line that says which were pooled. With
    several that set different settings: ReviewError, naming each sweep and its command line."""
    if len(overrides) < 2:
        return ""
    sweeps = "; ".join(named(top, root, commands.get(root, [])) for root in overrides)
    kinds = {settings(jobs) for jobs in overrides.values()}
    if len(kinds) > 1:
        differ = sorted(frozenset.union(*kinds) - frozenset.intersection(*kinds))
        raise ReviewError(f"{top} holds {len(overrides)} sweeps that set different settings ({', '.join(differ)}): "
                          f"{sweeps}; pass one sweep's dir, e.g. {next(iter(overrides))}")
    return f"pooled {len(overrides)} sweeps of {top}: {sweeps}; pass one sweep's dir to review it alone"
