"""Section D: start-up and time to result.

Short commands (``--help``, two config errors, ``import lightning`` as a floor) take turns over rounds;
"first training step" and "time to result" come from the training runs of B and C: process start to the
end of the first optimizer step, and to the first validation with ``val/seq_acc >= 0.99``.
"""

from __future__ import annotations

import math
import sys
from typing import Any

from benchmarks.processes import ROOT, RunFailed, child_env, run_process
from benchmarks.rows import Progress, Row, check, median, no_progress
from benchmarks.training import TrainingPlan

COMMAND_LIMIT_S = 2.5
FIRST_STEP_LIMIT_S = 6.0
RESULT_LIMIT_S = 30.0


def startup_commands(device: str = "cpu") -> dict[str, tuple[str, list[str], int]]:
    """key -> (label, argv, expected exit status: 0 or non-zero)."""
    train = str(ROOT / "scripts" / "train.py")
    return {
        "help": ("python scripts/train.py --help", [sys.executable, train, "--help"], 0),
        "config_error": ("config error, cross-field rule: python scripts/train.py heads=5",
                         [sys.executable, train, "heads=5", f"device={device}"], 1),
        "type_error": ("config error, wrong type: python scripts/train.py d_model=wide",
                       [sys.executable, train, "d_model=wide", f"device={device}"], 1),
        "import_lightning": ("reference: python -c 'import lightning' (a floor for any training start)",
                             [sys.executable, "-c", "import lightning"], 0),
    }


def run_startup(*, repeats: int, device: str = "cpu", progress: Progress = no_progress) -> dict[str, list[float]]:
    """Wall seconds of each short command, taking turns over ``repeats`` rounds."""
    commands = startup_commands(device)
    times: dict[str, list[float]] = {k: [] for k in commands}
    keys = list(commands)
    for round_index in range(max(1, repeats)):
        shift = round_index % len(keys)
        for key in keys[shift:] + keys[:shift]:
            progress(f"start-up: round {round_index + 1}/{repeats} · {key.replace('_', ' ')}")
            _, args, expected = commands[key]
            wall, proc = run_process(args, env=child_env())
            if (proc.returncode == 0) != (expected == 0):
                raise RunFailed(f"{' '.join(args[1:])}: exit status {proc.returncode}\n"
                                f"{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
            times[key].append(wall)
    return times


def startup_rows(times: dict[str, list[float]], runs: dict[str, list[dict]], plan: TrainingPlan
                 ) -> tuple[list[Row], dict[str, Any]]:
    rows: list[Row] = []
    targets: dict[str, Any] = {}
    for key, (label, _, _) in startup_commands().items():
        value = median(times[key])
        is_target = key != "import_lightning"
        rows.append(Row("D", f"D/{key}", label, value, "s", target=f"<= {COMMAND_LIMIT_S} s" if is_target else "",
                        ok=check(value, "<=", COMMAND_LIMIT_S) if is_target else None, samples=times[key]))
        if is_target:
            targets[key] = value
    framework = [r for kind in ("maps_on", "maps_off") for r in runs.get(kind, [])]
    first_steps = [r["first_step_after_start_s"] for r in framework if r.get("first_step_after_start_s") is not None]
    first_step = median(first_steps) if first_steps else None
    targets["first step"] = first_step
    rows.append(Row("D", "D/first_step", "process start -> first training step done (scripts/train.py)", first_step,
                    "s", target=f"<= {FIRST_STEP_LIMIT_S:.0f} s", ok=check(first_step, "<=", FIRST_STEP_LIMIT_S),
                    samples=first_steps, note=f"median of {len(first_steps)} training runs"))
    return rows + result_rows(runs.get("maps_on", []), plan, targets), targets


def result_rows(on: list[dict], plan: TrainingPlan, targets: dict[str, Any]) -> list[Row]:
    """Time to result and the whole default run; adds "time to result" to ``targets``."""
    label = "default run: start -> validation seq_acc >= 0.99"
    if plan.max_steps is not None or not on:  # --quick: short runs, not the default one
        why = f"skipped by --quick (runs of max_steps={plan.max_steps})" if on else "no training run"
        return [Row("D", "D/time_to_result", label, None, "s", target=f"<= {RESULT_LIMIT_S:.0f} s", note=why),
                Row("D", "D/default_run", "default run: whole process", None, "s",
                    note="skipped by --quick" if on else "no training run")]
    solved = [r["solved_after_start_s"] for r in on]
    value = median([s if s is not None else math.inf for s in solved])
    value = None if math.isinf(value) else value
    targets["time to result"] = value
    steps = sorted({r["solved_step"] for r in on if r["solved_step"] is not None})
    note = (f"median of {len(on)} runs; solved at step {', '.join(map(str, steps))}" if value is not None
            else f"not reached: best val/seq_acc {max((r['best_seq_acc'] or 0) for r in on):.3f}")
    return [
        Row("D", "D/time_to_result", label, value, "s", target=f"<= {RESULT_LIMIT_S:.0f} s",
            ok=check(value, "<=", RESULT_LIMIT_S) if value is not None else False, note=note,
            samples=[s for s in solved if s is not None]),
        Row("D", "D/default_run", "default run: whole process (early stop, final validation, exit)",
            median([r["process_s"] for r in on]), "s", samples=[r["process_s"] for r in on],
            note=f"{on[0]['steps']} steps; {on[0]['torch_threads']} torch threads, "
                 f"OMP_WAIT_POLICY={on[0]['omp_wait_policy'] or 'unset'}"),
    ]
