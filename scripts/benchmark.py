#!/usr/bin/env python
"""Benchmarks of attention-lab against PyTorch's own implementations.

    python scripts/benchmark.py                    # full shapes (several minutes on 2 CPU cores)
    python scripts/benchmark.py --quick            # small shapes and short runs: seconds, checks that it all runs
    python scripts/benchmark.py --sections A       # only the attention kernels
    python scripts/benchmark.py --device cuda      # kernels and training on the GPU

A  attention kernels: ch. 3's efficient-MHA setup (batch 8, 1024 tokens, d=768, 12 heads, causal, float32),
   plus grouped-query attention, RoPE and ALiBi against hand-written SDPA twins
B  training throughput: scripts/train.py (Lightning) vs a plain PyTorch loop on the same model, and Lightning's
   own loop alone between them
C  attention-map logging overhead: the same training with the TensorBoard heatmaps on and off; and the head
   ablation and activation patching of the final validation, on and off; the circuit metrics and the attribution
   patching of every validation, timed in-process against the default run
D  start-up and time to result: --help, config errors, first training step, solving the default task; a sweep
   job's time beyond its training (hydra/launcher=parallel)
E  what replaces attention: fwd+bwd time and peak memory against the sequence length (256..8192) for multihead
   and every multi-head, self-attending variant of the registry (--mixers picks some), growth exponents,
   crossovers, a log-log plot (<json>.png); linear, sigmoid and conv against hand-written twins

Prints rich tables and writes every number (and every sample) to outputs/benchmarks/<timestamp>.json.
The method and the latest results: docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

from benchmarks.report import SECTIONS, markdown, section_table, targets_table, unique_json_path

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["main", "parse_args", "unique_json_path"]


def parse_sections(text: str) -> str:
    chosen = [s.strip().upper() for s in text.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SECTIONS]
    if not chosen or unknown:
        raise argparse.ArgumentTypeError(f"choose among A, B, C, D, E (comma-separated), got {text!r}")
    return "".join(s for s in SECTIONS if s in chosen)  # e.g. "AB", in A-E order


def parse_mixers(text: str) -> tuple[str, ...]:
    """Section E's mixers besides multihead: names among those the registry offers (benchmarks.scaling)."""
    from benchmarks.scaling import BASELINE, scaled_mixers

    offered = scaled_mixers()
    chosen = tuple(name.strip() for name in text.split(",") if name.strip())
    unknown = [name for name in chosen if name not in offered]
    if not chosen or unknown:
        raise argparse.ArgumentTypeError(f"choose among {', '.join(offered[1:])} (comma-separated; {BASELINE} is "
                                         f"always measured), got {text!r}")
    return chosen


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="scripts/benchmark.py",
        description=__doc__.split("\n\n")[0],
        epilog="\n\n".join(__doc__.split("\n\n")[1:]),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--quick", action="store_true",
                        help="small kernel shapes, one 30-step run of each kind, one start-up round (no default run)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where kernels and training run")
    parser.add_argument("--repeats", type=positive_int, default=None,
                        help="timed rounds of the kernels and of the start-up commands (default 5; --quick: 3 and 1)")
    parser.add_argument("--train-rounds", type=positive_int, default=None,
                        help="rounds of training runs for B, C and D (default 3; --quick: 1)")
    parser.add_argument("--sections", type=parse_sections, default="A,B,C,D,E", help="e.g. A,B (default: A,B,C,D,E)")
    parser.add_argument("--mixers", type=parse_mixers, default=None,
                        help="section E: the mixers measured against multihead (default: every multi-head, "
                             "self-attending variant of the registry)")
    parser.add_argument("--out-dir", type=Path, default=ROOT / "outputs" / "benchmarks",
                        help="where the JSON results go (default: outputs/benchmarks)")
    parser.add_argument("--markdown", action="store_true",
                        help="also print the tables as Markdown (for docs/benchmarks.md)")
    return parser.parse_args(argv)


def combined(*parts: tuple[list, dict]) -> tuple[list, dict]:
    """One section's rows and target inputs from several measurements."""
    return [row for rows, _ in parts for row in rows], {k: v for _, targets in parts for k, v in targets.items()}


def measure(args: argparse.Namespace, shape, plan, report, plot_path: Path | None = None
            ) -> tuple[list, list[str], dict, dict]:
    """Runs the chosen sections: (rows, errors, training runs, each section's target inputs)."""
    from benchmarks.ablation_overhead import ablation_rows
    from benchmarks.attribution_cost import attribution_rows
    from benchmarks.compose import compose_train_config
    from benchmarks.kernels import run_kernels
    from benchmarks.logging_overhead import logging_rows
    from benchmarks.scaling import FULL_SCALING, QUICK_SCALING, run_scaling
    from benchmarks.startup import run_startup, startup_rows
    from benchmarks.sweep_overhead import FULL_SWEEP, QUICK_SWEEP, run_sweep, sweep_rows
    from benchmarks.throughput import throughput_rows
    from benchmarks.training import run_training
    from benchmarks.validation_metrics import validation_metric_rows

    rows, errors = [], []
    runs: dict[str, list[dict]] = {}
    targets_in: dict[str, dict | None] = dict.fromkeys(SECTIONS)
    kernel_repeats = args.repeats or (3 if args.quick else 5)
    startup_repeats = args.repeats or (1 if args.quick else 5)

    def attempt(section: str, fn) -> None:
        try:
            section_rows, targets_in[section] = fn()
            rows.extend(section_rows)
        except Exception as err:  # noqa: BLE001 - report it, go on with the other sections
            errors.append(f"{section}: {type(err).__name__}: {err}")

    if "A" in args.sections:
        attempt("A", lambda: run_kernels(shape, repeats=kernel_repeats, device=args.device, progress=report))
    workdir = Path(tempfile.mkdtemp(prefix="attention-lab-bench-"))
    try:
        if set("BCD") & set(args.sections):
            try:
                runs = run_training(plan, sections=args.sections, device=args.device, workdir=workdir,
                                    progress=report)
            except Exception as err:  # noqa: BLE001
                errors.append(f"training runs: {type(err).__name__}: {err}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if runs and "B" in args.sections:
        attempt("B", lambda: throughput_rows(runs, plan))
    if runs and "C" in args.sections:
        every_n = int(compose_train_config([]).callbacks.attention_maps.every_n_steps)
        attempt("C", lambda: combined(logging_rows(runs, every_n), ablation_rows(runs),
                                        validation_metric_rows(runs), attribution_rows(runs)))
    if "D" in args.sections:
        sweep = QUICK_SWEEP if args.quick else FULL_SWEEP
        attempt("D", lambda: combined(
            startup_rows(run_startup(repeats=startup_repeats, device=args.device, progress=report), runs, plan),
            sweep_rows(run_sweep(sweep, device=args.device, progress=report), sweep)))
    if "E" in args.sections:
        attempt("E", lambda: run_scaling(QUICK_SCALING if args.quick else FULL_SCALING, repeats=kernel_repeats,
                                         device=args.device, plot_path=plot_path, progress=report,
                                         mixers=args.mixers))
    return rows, errors, runs, targets_in


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from benchmarks.kernel_shape import FULL_KERNELS, QUICK_KERNELS
    from benchmarks.machine import load_average, machine_info
    from benchmarks.rows import rows_to_json
    from benchmarks.targets import target_rows
    from benchmarks.training import FULL_TRAINING, QUICK_TRAINING, TrainingPlan

    console = Console()
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            console.print("error: --device cuda: no CUDA GPU is visible to torch here; use --device cpu")
            return 2

    command = "python scripts/benchmark.py" + ("" if argv is None and len(sys.argv) == 1 else
                                               " " + shlex.join(sys.argv[1:] if argv is None else argv))
    plan = QUICK_TRAINING if args.quick else FULL_TRAINING
    if args.train_rounds:
        plan = TrainingPlan(plan.max_steps, plan.warmup_steps, args.train_rounds)
    shape = QUICK_KERNELS if args.quick else FULL_KERNELS
    machine = machine_info(args.device)
    load_start = load_average()
    console.print(f"[bold]attention-lab benchmarks[/] · {machine['cpu']}, {machine['cores']} cores, torch "
                  f"{machine['torch']} ({machine['torch_threads']} threads), lightning {machine['lightning']}, "
                  f"device {args.device} · load average {load_start}")

    started = time.perf_counter()
    path = unique_json_path(args.out_dir)  # reserved now: section E's plot goes beside it
    path.touch(exist_ok=False)
    plot_path = path.with_suffix(".png") if "E" in args.sections else None
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                        console=Console(stderr=True), transient=True)
    with progress:
        task = progress.add_task("starting", total=None)
        rows, errors, runs, targets_in = measure(args, shape, plan,
                                                 lambda text: progress.update(task, description=text), plot_path)

    targets = target_rows(*(targets_in[s] for s in "ABCD"), heads=shape.heads)
    kernel_repeats = args.repeats or (3 if args.quick else 5)
    startup_repeats = args.repeats or (1 if args.quick else 5)
    training = ("the default run (python scripts/train.py)" if plan.max_steps is None
                else f"runs of max_steps={plan.max_steps}")
    titles = {
        "A": f"A. Attention kernels: batch {shape.batch}, {shape.tokens} tokens, d={shape.d_model}, "
             f"{shape.heads} heads, causal, float32 ({args.device}); median of {kernel_repeats} rounds",
        "B": f"B. Training throughput: {training}, median of {plan.rounds} runs each",
        "C": f"C. Attention-map logging overhead, head ablation and patching: {training}, median of {plan.rounds} runs each",
        "D": f"D. Start-up and time to result: median of {startup_repeats} rounds; training runs of B/C",
        "E": "E. What replaces attention: causal mixers against the sequence length, batch and width fixed "
             f"(see docs/benchmarks.md); median of {kernel_repeats} rounds",
    }
    for section in args.sections:
        section_rows = [r for r in rows if r.section == section]
        if section_rows:
            console.print(section_table(titles[section], section_rows))
    if targets:
        console.print(targets_table(targets))
    if args.markdown:
        console.print(markdown(rows, targets), markup=False, highlight=False, soft_wrap=True)

    load_end = load_average()
    result = {
        "created": datetime.now().isoformat(timespec="microseconds"),
        "command": command,
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "machine": machine,
        "load_average": {"start": load_start, "end": load_end},
        "duration_s": round(time.perf_counter() - started, 1),
        "kernel_shape": vars(shape) if "A" in args.sections else None,
        "training_plan": vars(plan) if set("BCD") & set(args.sections) else None,
        "rows": rows_to_json(rows),
        "targets": rows_to_json(targets),
        "runs": [run for kind in runs.values() for run in kind],
        "errors": errors,
    }
    with path.open("w") as f:  # the name reserved above: never another run's
        json.dump(result, f, indent=2)
    console.print(f"{len(rows)} rows in {result['duration_s']:.0f} s · load average {load_start} -> {load_end} · "
                  f"written to {path}" + (f" (plot: {plot_path})" if plot_path and plot_path.exists() else ""))
    for error in errors:
        console.print(f"[red]error[/] {error}", markup=True, highlight=False)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
