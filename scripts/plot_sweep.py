#!/usr/bin/env python
"""Plot a metric of a sweep against one swept setting, one line per value of another, with error bars over seeds
(the shape of Zoology's Figure 2), and print the numbers as a Markdown table.

    python scripts/plot_sweep.py outputs/multirun/<date>/<time>                       # val/token_acc vs d_model per model
    python scripts/plot_sweep.py <sweep dir> --x heads --line model --metric val/seq_acc --out reports/
    python scripts/plot_sweep.py <sweep dir> --best-of lr --x state_size      # experiment=mqar

Jobs that differ only in `seed` form one point: the mean, and the sample std as its error bar (n = the ok jobs).
With --best-of lr, the jobs that differ only in `lr` (and `seed`) form one cell, whose point is the lr with the
best mean (Zoology reports the best of four learning rates). The table calls it the best only when its seeds
separate it from every other lr of the cell: each value with at least 2 finished seeds, and the means further
apart than the larger of the two sample stds (one seed separates nothing); otherwise it says "highest mean of 4,
not separated from lr=0.01 by 2 seeds". --x state_size reads each job's recorded recurrent
state per layer (metrics.json's state_size) instead of a swept setting.

Writes <metric>_vs_<x>.png and .md beside the sweep's jobs (or in --out). Reads only what the sweep wrote, as
scripts/compare.py does; no torch import.
"""

import argparse
import sys

from attention_lab.review.cli import REVIEW_FAILURES, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="plot_sweep.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", help="sweep directory (hydra.sweep.dir), e.g. outputs/multirun/<date>/<time>; a "
                        "folder of sweeps that set the same settings is pooled")
    parser.add_argument("--x", default="d_model", help="the swept setting on the x axis (default d_model), or state_size: the recurrent state "
                        "per layer each job recorded")
    parser.add_argument("--line", default="model", help="one line per value of this setting (default model)")
    parser.add_argument("--metric", default="val/token_acc", help="the metric on the y axis (default val/token_acc)")
    parser.add_argument("--best-of", metavar="SETTING",
                        help="a setting swept only to pick its best value (e.g. lr): each point is the value with "
                             "the best mean of --metric among the jobs that differ only in it, named in the table, "
                             "with the values its seeds do not separate from it")
    parser.add_argument("--out", metavar="DIR", help="where the .png and .md go (default: the sweep directory)")
    parser.add_argument("--stale-minutes", type=float, default=30.0,
                        help="a job without metrics and without writes for this long is 'stale' (default 30)")
    args = parser.parse_args(argv)

    from attention_lab.records.escape import console
    from attention_lab.review.cli import output_dir, written, written_text
    from attention_lab.review.lines import line_plot, series, to_markdown
    from attention_lab.review.sweep import collect_sweep

    try:
        sweep = collect_sweep(args.sweep, metric=args.metric, stale_minutes=args.stale_minutes)
        out = output_dir(args.out, default=sweep.dir)
        lines = series(sweep, args.x, args.line, args.metric, best=args.best_of)
        stem = f"{args.metric.replace('/', '_')}_vs_{args.x}"
        best = f", the {args.best_of} of highest mean" if args.best_of else ""
        title = f"{args.metric} against {args.x}, one line per {args.line}{best} · {sweep.dir.name}"
        png = written(out / f"{stem}.png", lambda tmp: line_plot(lines, args.x, args.line, args.metric, tmp, title))
        markdown = to_markdown(lines, args.x, args.line, args.metric)
        table = written_text(out / f"{stem}.md", markdown)
    except REVIEW_FAILURES as err:
        return failed(err, parser.prog, args.sweep)
    if sweep.pooled:  # a date folder of several sweeps
        print(console(sweep.pooled))
    print(console(markdown))  # the lines' names are values from the sweep's records
    print(console(f"wrote {png}, {table}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
