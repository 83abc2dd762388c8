"""Section C, second part: the head ablation and the activation patching that every run does in its final
validation (the patching where the task has a corruption), on and off.

The ablation pass is the final validation's wall time with both minus without (``ABLATION_OFF``), the two
runs of a round back to back; its overhead is that time over the wall time of the whole default run (the process,
from start to exit), median over rounds.
"""

from __future__ import annotations

from typing import Any

from benchmarks.rows import Row, check, median
from benchmarks.training import ABLATION_OFF

LIMIT = 0.10  # the ablation and patching passes within 10 % of the default run's wall time


def ablation_rows(runs: dict[str, list[dict]]) -> tuple[list[Row], dict[str, Any]]:
    pairs = [(a, b) for a, b in zip(runs["maps_on"], runs["ablation_off"], strict=True)
             if a.get("final_validation_s") is not None and b.get("final_validation_s") is not None]
    if not pairs:
        raise ValueError("no run recorded its final validation time")
    passes = [a["final_validation_s"] - b["final_validation_s"] for a, b in pairs]
    shares = [p / a["process_s"] for p, (a, _) in zip(passes, pairs, strict=True)]
    whole = [a["process_s"] / b["process_s"] - 1 for a, b in pairs]
    overhead = median(shares)
    rows = [
        Row("C", "C/final_validation_ablation_on", "final validation wall time, ablation and patching on (default)",
            median([a["final_validation_s"] for a, _ in pairs]), "s", samples=[a["final_validation_s"] for a, _ in pairs]),
        Row("C", "C/final_validation_ablation_off", f"final validation wall time, both off ({' '.join(ABLATION_OFF)})",
            median([b["final_validation_s"] for _, b in pairs]), "s", samples=[b["final_validation_s"] for _, b in pairs]),
        Row("C", "C/ablation_pass", "the ablation and patching passes: final validation on - off", median(passes), "s",
            samples=passes),
        Row("C", "C/ablation_overhead", "ablation pass / wall time of the default run (whole process)",
            overhead * 100, "%", target=f"<= {LIMIT * 100:.0f} %", ok=check(overhead, "<=", LIMIT),
            note="median of the per-round ratios", samples=[s * 100 for s in shares]),
        Row("C", "C/ablation_run_ratio", "whole run with ablation / without - 1 (start-up noise included)",
            median(whole) * 100, "%", samples=[w * 100 for w in whole]),
    ]
    return rows, {"ablation overhead": overhead, "ablation pass": median(passes)}
