#!/usr/bin/env python
"""Compare the jobs of a sweep: one row per job, failed and still-running jobs included.

    python scripts/compare.py outputs/multirun/<date>/<time>
    python scripts/compare.py outputs/multirun/<date>/<time> --metric val/loss --out reports/

Prints a table (job, its overrides, final validation metrics, parameter count, steps, wall time,
status, error) and writes beside the sweep's jobs:
  compare.csv   raw values, one row per job
  compare.md    the table in Markdown
  compare.png   bar chart of the optimized metric per configuration (best highlighted)
Everything comes from what the sweep wrote: sweep_summary.json, each job's run_info.json,
metrics.json and .hydra/ files, and Hydra's multirun.yaml. Status: as recorded (ok, failed,
interrupted, running); ok when metrics.json exists; failed when a running job's process is gone;
stale when a job has no record and nothing was written for --stale-minutes.
"""

import argparse
import sys

from attention_lab.review.cli import ReviewError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compare.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", help="sweep directory (hydra.sweep.dir), e.g. outputs/multirun/<date>/<time>")
    parser.add_argument("--metric", help="metric of the bar chart and of 'best' (default: the sweep's optimized_metric)")
    parser.add_argument("--out", metavar="DIR", help="where compare.csv/.md/.png go (default: the sweep directory)")
    parser.add_argument("--stale-minutes", type=float, default=30.0,
                        help="a job without metrics and without writes for this long is 'stale' (default 30)")
    args = parser.parse_args(argv)
    sweep_arg = args.sweep

    from rich.console import Console

    from attention_lab.review.cli import output_dir
    from attention_lab.review.compare import rich_table, write_reports
    from attention_lab.review.sweep import collect_sweep

    try:
        sweep = collect_sweep(sweep_arg, metric=args.metric, stale_minutes=args.stale_minutes)
        out = output_dir(args.out, default=sweep.dir)  # before anything is printed
        console = Console(width=None if sys.stdout.isatty() else 200)
        console.print(rich_table(sweep))
        paths = write_reports(sweep, out)
    except ReviewError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    console.print("wrote " + ", ".join(str(p) for p in paths.values()), highlight=False, soft_wrap=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
