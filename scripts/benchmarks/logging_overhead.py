"""Section C: the same training with the attention maps on and off.

The overhead is the median over rounds of fit(on) / fit(off) - 1, the two runs of a round back to back; of fit
and the final validation together as well (the final model's images are drawn while that validation runs), and
in CPU time (all threads: drawing and TensorBoard's writer may run on threads of their own). Inside
each maps-on run, the profiler (benchmarks.hook_profiler) times every call of the map logger's hooks: the
time the training thread spends in the logger.
"""

from __future__ import annotations

from typing import Any

from attention_lab.callbacks.probe_logging import is_doubling
from benchmarks.rows import Row, check, median
from benchmarks.training import MAPS_OFF

OUTSIDE_FIT = ("setup", "teardown")  # hooks that run before fit starts or after it ends


def logging_events(run: dict, every_n_steps: int) -> list[float]:
    """Seconds of the calls that logged: the batch ends at the map logger's steps (its predictions: once per
    doubling; batch i ends step i + 1; ``every_n_steps`` the schedule's first interval), then the end of training
    unless its step was just logged."""
    hooks = run["map_logger_hooks_s"]
    batch_ends = hooks.get("on_train_batch_end", [])
    events = [s for i, s in enumerate(batch_ends) if is_doubling(i + 1, every_n_steps)]
    return events + (hooks.get("on_train_end", []) if not is_doubling(len(batch_ends), every_n_steps) else [])


def run_s(run: dict) -> float:
    """Wall seconds of fit and the final validation after it."""
    return run["fit_s"] + run["final_validation_s"]


def time_in_logger(run: dict) -> float:
    """Seconds the training thread spent in the map logger's hooks during fit."""
    return sum(sum(calls) for hook, calls in run["map_logger_hooks_s"].items() if hook not in OUTSIDE_FIT)


def logging_rows(runs: dict[str, list[dict]], every_n_steps: int) -> tuple[list[Row], dict[str, Any]]:
    on, off = runs["maps_on"], runs["maps_off"]
    pairs = list(zip(on, off, strict=True))
    overhead = median([a["fit_s"] / b["fit_s"] - 1 for a, b in pairs])
    cpu_overhead = median([a["fit_cpu_s"] / b["fit_cpu_s"] - 1 for a, b in pairs])
    # The final model's images are drawn while train.py's final validation runs, which waits for them: the maps'
    # whole cost to a run is in fit + final validation.
    run_overhead = median([run_s(a) / run_s(b) - 1 for a, b in pairs])
    events = [logging_events(r, every_n_steps) for r in on]
    first = [e[0] for e in events if e]
    later = [s for e in events for s in e[1:]]
    share = median([time_in_logger(r) / r["fit_s"] for r in on])
    per_run = median([len(e) for e in events])
    steps = on[0]["steps"]
    rows = [
        Row("C", "C/maps_on", f"fit wall time, attention maps on (as configured), {steps} steps",
            median([r["fit_s"] for r in on]), "s", samples=[r["fit_s"] for r in on]),
        Row("C", "C/maps_off", f"fit wall time, attention maps off ({' '.join(MAPS_OFF)}), {steps} steps",
            median([r["fit_s"] for r in off]), "s", samples=[r["fit_s"] for r in off]),
        Row("C", "C/overhead", "overhead: fit wall time on / off - 1", overhead * 100, "%",
            target="<= 5 %", ok=check(overhead, "<=", 0.05), note="median of the per-round ratios",
            samples=[(a["fit_s"] / b["fit_s"] - 1) * 100 for a, b in pairs]),
        Row("C", "C/overhead_run", "overhead: fit + final validation wall time on / off - 1", run_overhead * 100, "%",
            note="the final images are drawn during the final validation",
            samples=[(run_s(a) / run_s(b) - 1) * 100 for a, b in pairs]),
        Row("C", "C/overhead_cpu", "overhead in CPU time (all threads): on / off - 1", cpu_overhead * 100, "%",
            samples=[(a["fit_cpu_s"] / b["fit_cpu_s"] - 1) * 100 for a, b in pairs]),
        Row("C", "C/first_event", "first logging event, time on the training thread",
            median(first) * 1e3 if first else None, "ms", samples=[s * 1e3 for s in first]),
        Row("C", "C/event", f"later logging events, time on the training thread, {max(per_run - 1, 0):.0f} per run",
            median(later) * 1e3 if later else None, "ms", samples=[s * 1e3 for s in later]),
        Row("C", "C/share", "time in the map logger's hooks / fit wall time, same run", share * 100, "%",
            samples=[time_in_logger(r) / r["fit_s"] * 100 for r in on],
            note="every hook of the logger, waits for its drawing included; timed by a Lightning profiler"),
    ]
    return rows, {"logging overhead": overhead, "logging overhead (run)": run_overhead,
                  "logging overhead (CPU)": cpu_overhead, "logging share": share}
