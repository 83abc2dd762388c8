"""What ``scripts/findings.py`` does: a finding looked up by name, the seeds it is asked for, its sweeps run through
the lab's own command line (``scripts/train.py -m ... hydra/launcher=parallel``, in a subprocess: a sweep is a
process tree of its own), and its claims evaluated on the jobs' records, one line each."""

from __future__ import annotations

import difflib
import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from attention_lab.findings.best_of import best_per_seed
from attention_lab.findings.catalogue import FINDINGS, Finding
from attention_lab.findings.claims import Record, Verdict, shown_seeds
from attention_lab.findings.errors import FindingError
from attention_lab.findings.records import read_results, seconds_per_job

MAX_SEEDS = 100  # seeds one check may ask for: a sweep of jobs x seeds, each job minutes of CPU
MAX_SEED = 2**32 - 1  # torch's and numpy's seeds are 32-bit
SEEDS = re.compile(r"^(\d{1,10})(?:-(\d{1,10}))?$")


def find(name: str) -> Finding:
    names = [f.name for f in FINDINGS]
    if name in names:
        return FINDINGS[names.index(name)]
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"did you mean {close[0]}? " if close else ""
    raise FindingError("finding", repr(name), f"no such finding; {hint}(the findings: {', '.join(names)})")


def parse_seeds(text: str) -> tuple[int, ...]:
    """``3-5`` -> (3, 4, 5); ``0,7,9`` (each a seed or a range) -> (0, 7, 9)."""
    seeds: list[int] = []
    allowed = (f"A-B or A,B,... with 0 <= A <= B <= {MAX_SEED}, each seed once, at most {MAX_SEEDS} seeds "
               "(e.g. --seeds 20-21)")
    for part in text.split(","):
        match = SEEDS.match(part.strip())
        if not match:
            raise FindingError("--seeds", repr(text), allowed)
        low = int(match[1])
        high = int(match[2]) if match[2] is not None else low
        if high < low or high > MAX_SEED or len(seeds) + high - low + 1 > MAX_SEEDS:
            raise FindingError("--seeds", repr(text), allowed)
        seeds += range(low, high + 1)
    if len(set(seeds)) != len(seeds):
        raise FindingError("--seeds", repr(text), allowed)
    return tuple(seeds)


def evaluate(finding: Finding, records: Sequence[Record]) -> list[Verdict]:
    chosen = best_per_seed(records, finding.best_of) if finding.best_of else records
    return [claim.evaluate(chosen) for claim in finding.claims]


def listing(root: Path) -> list[str]:
    """``findings.py list``: each finding, its commands, seeds, cost and claims (with the recorded verdicts)."""
    lines = []
    for finding in FINDINGS:
        recorded = read_results(root, finding)
        lines += [f"{finding.name}: {finding.title} (docs/experiments.md#{finding.section})",
                  *(f"  {line}" for line in finding.command_lines()), f"  seeds: {shown_seeds(finding.seeds)}"]
        verdicts: list[Verdict | None] = [None] * len(finding.claims)
        if recorded is None:
            lines.append("  cost: no recorded results")
        else:
            records, data = recorded
            per_job = seconds_per_job(records)
            cost = (f"{len(records)} jobs x {per_job:.1f} s = {len(records) * per_job / 60:.1f} min of job time"
                    if per_job is not None else f"{len(records)} jobs, no time recorded")
            lines.append(f"  cost: {cost} (recorded: {data.get('source', 'no source named')})")
            verdicts = evaluate(finding, records)
        for claim, verdict in zip(finding.claims, verdicts, strict=True):
            said = "" if verdict is None else f"  [{'held' if verdict.held else 'NOT HELD'} on the record: " \
                                              f"{verdict.numbers}]"
            lines.append(f"  - {claim}{said}")
    return lines


def sweep_dirs_for(finding: Finding, out: Path) -> list[Path]:
    """One new dir per sweep of the finding, under ``out``; refused when one is already there (a run dir is never
    reused)."""
    dirs = [out / str(i) for i in range(len(finding.commands))]
    taken = [d for d in dirs if d.exists()]
    if taken:
        raise FindingError("--out", str(out), f"a new folder ({taken[0]} exists already)")
    return dirs


def run_sweeps(finding: Finding, seeds: Sequence[int], dirs: Sequence[Path], root: Path) -> list[Path]:
    """Each sweep of the finding through ``scripts/train.py -m``, one after the other; the dirs of those that ran
    (a sweep that fails still leaves its finished jobs)."""
    ran = []
    for command, sweep_dir in zip(finding.commands, dirs, strict=True):
        argv = [sys.executable, str(root / "scripts" / "train.py"), "-m", *command,
                "seed=" + ",".join(map(str, seeds)), "hydra/launcher=parallel", f"hydra.sweep.dir={sweep_dir}"]
        print("running: " + " ".join(argv[1:]), flush=True)
        started = time.monotonic()
        status = subprocess.run(argv, cwd=root, check=False).returncode
        print(f"  exit status {status} after {time.monotonic() - started:.0f} s", flush=True)
        if sweep_dir.is_dir():
            ran.append(sweep_dir)
    return ran


def report(finding: Finding, verdicts: Sequence[Verdict], records: Sequence[Record], problems: Sequence[str]) -> str:
    seeds = sorted({r.seed for r in records}, key=lambda s: (len(s), s))
    lines = [f"{finding.name}: {len(records)} finished jobs, seeds {','.join(seeds) or 'none'}"]
    lines += [f"warning: {line}" for line in problems]
    lines += [verdict.line() for verdict in verdicts]
    held = sum(v.held for v in verdicts)
    lines.append(f"{held} of {len(verdicts)} claims held")
    return "\n".join(lines)
