"""Section B: training throughput of ``scripts/train.py`` against the plain PyTorch loop.

The ratio is the median over rounds of framework / plain loop within a round (the runs of a round are back
to back, so a change in the machine's load hits both); per CPU-second as well, which other processes on
the machine hardly change. Lightning's own loop with nothing of the lab's (benchmarks.lightning_floor), in the same
rounds, splits the gap: Lightning's part (floor / plain loop) and the lab's (framework / floor).
"""

from __future__ import annotations

from typing import Any

from benchmarks.rows import Row, median
from benchmarks.training import MAPS_OFF, TrainingPlan


def per_round_ratio(runs: list[dict], plain: list[dict], key: str) -> float:
    return median([f[key] / p[key] for f, p in zip(runs, plain, strict=True)])


def throughput_rows(runs: dict[str, list[dict]], plan: TrainingPlan) -> tuple[list[Row], dict[str, Any]]:
    on, plain = runs["maps_on"], runs["plain"]
    ratio = per_round_ratio(on, plain, "steps_per_s")
    cpu_ratio = per_round_ratio(on, plain, "steps_per_cpu_s")
    window = f"steps {plan.warmup_steps + 1}-{on[0]['steps']}, validation excluded"
    rows = [Row("B", "B/framework", "framework: scripts/train.py (default model, logging as configured)",
                median([r["steps_per_s"] for r in on]), "steps/s", ratio=ratio, ratio_to="plain loop",
                note=f"{window}; ratio: median of per-round ratios", samples=[r["steps_per_s"] for r in on])]
    if runs.get("maps_off"):
        off = runs["maps_off"]
        rows.append(Row("B", "B/framework_no_maps", f"framework without the attention maps ({' '.join(MAPS_OFF)})",
                        median([r["steps_per_s"] for r in off]), "steps/s",
                        ratio=per_round_ratio(off, plain, "steps_per_s"), ratio_to="plain loop", note=window,
                        samples=[r["steps_per_s"] for r in off]))
    rows += [
        Row("B", "B/plain", "plain PyTorch loop: same SequenceModel, data, batch, AdamW, clipping",
            median([r["steps_per_s"] for r in plain]), "steps/s",
            note=f"{window}; {plain[0]['torch_threads']} torch threads, as the framework",
            samples=[r["steps_per_s"] for r in plain]),
        Row("B", "B/framework_cpu", "framework, per CPU-second (all threads)",
            median([r["steps_per_cpu_s"] for r in on]), "steps/CPU-s", ratio=cpu_ratio, ratio_to="plain loop",
            note="CPU time: hardly changed by the other processes of a shared machine",
            samples=[r["steps_per_cpu_s"] for r in on]),
        Row("B", "B/plain_cpu", "plain loop, per CPU-second (all threads)",
            median([r["steps_per_cpu_s"] for r in plain]), "steps/CPU-s",
            samples=[r["steps_per_cpu_s"] for r in plain]),
    ]
    if runs.get("floor"):
        floor = runs["floor"]
        rows += [
            Row("B", "B/lightning_floor", "Lightning's own loop: a bare Trainer (no callbacks, logger, checkpoints, "
                "validation), same module, data, AdamW, clipping", median([r["steps_per_s"] for r in floor]), "steps/s",
                ratio=per_round_ratio(floor, plain, "steps_per_s"), ratio_to="plain loop",
                note=f"{window}; per CPU-second {per_round_ratio(floor, plain, 'steps_per_cpu_s'):.2f}x the plain loop",
                samples=[r["steps_per_s"] for r in floor]),
            Row("B", "B/framework_vs_floor", "framework steps/s / Lightning's own loop (what the lab adds)",
                per_round_ratio(on, floor, "steps_per_s"), "x",
                note=f"per CPU-second {per_round_ratio(on, floor, 'steps_per_cpu_s'):.2f}x; median of per-round ratios",
                samples=[f["steps_per_s"] / r["steps_per_s"] for f, r in zip(on, floor, strict=True)]),
        ]
    return rows, {"throughput ratio": ratio, "throughput ratio (CPU time)": cpu_ratio}
