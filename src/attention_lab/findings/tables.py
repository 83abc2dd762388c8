"""docs/experiments.md's findings table, written by ``make docs`` from the declared claims and the recorded results
(``docs/results/<name>.json``): each claim, held or not on the recorded jobs with the numbers, and what recorded
them; a finding without recorded results says so."""

from __future__ import annotations

from pathlib import Path

from attention_lab.findings.catalogue import FINDINGS
from attention_lab.findings.checks import evaluate
from attention_lab.findings.claims import shown_seeds
from attention_lab.findings.records import read_results, results_path, seconds_per_job


def cell(text: str) -> str:
    return " ".join(text.split()).replace("|", r"\|")


def findings_table(root: Path) -> str:
    rows = ["| finding | claim | on the recorded jobs | recorded |", "|---|---|---|---|"]
    for finding in FINDINGS:
        name = f"[`{finding.name}`](#{finding.section})"
        recorded = read_results(root, finding)
        if recorded is None:
            rows += [f"| {name} | {cell(str(claim))} | no recorded results | |" for claim in finding.claims]
            continue
        records, data = recorded
        seeds = sorted({int(r.seed) for r in records if r.seed.isdigit()})
        per_job = seconds_per_job(records)
        cost = f", {len(records)} jobs x {per_job:.0f} s" if per_job is not None else ""
        where = results_path(root, finding).relative_to(root / "docs").as_posix()
        source = cell(f"[{where}]({where}): seeds {shown_seeds(seeds)}{cost}; {data.get('source', '')}")
        for i, (claim, verdict) in enumerate(zip(finding.claims, evaluate(finding, records), strict=True)):
            said = f"{'held' if verdict.held else '**not held**'}: {verdict.numbers}"
            rows.append(f"| {name} | {cell(str(claim))} | {cell(said)} | {source if i == 0 else ''} |")
    return "\n".join(rows)
