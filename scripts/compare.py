#!/usr/bin/env python
"""Compare the jobs of a sweep: one row per job, failed and still-running jobs included; then, when a
configuration ran with several seeds, one row per configuration with mean ± std and n.

    python scripts/compare.py outputs/multirun/<date>/<time>
    python scripts/compare.py outputs/multirun/<date>/<time> --metric val/loss --out reports/
    python scripts/compare.py outputs/multirun/<date>/<time> --metric head_score/induction/max
    python scripts/compare.py outputs/multirun/<date>/<time> --metric ablation/zero/token_acc/layer1/head0
    python scripts/compare.py outputs/multirun/<date>/<time> --plot   # experiment=induction_formation
    python scripts/compare.py outputs/multirun/<date>/<time> --heads previous_token,induction

Error bars come from seeds: `python scripts/train.py -m heads=1,2 seed=0,1,2` runs each configuration three
times, and compare.py groups the jobs that differ only in `seed`: mean ± sample std (n=ok jobs; failed
jobs are counted, as in "n=2 of 3", but not averaged) of each metric, and of steps_to_solve ("3/3 solved,
233.3 ± 76.4": the first step at which val/seq_acc >= 0.99) when metrics.json has it. Steps are counts: a job's
as a whole number, a mean over seeds with one decimal.

Which configuration is the best: the one its seeds separate from every other, and none when they do not. Two
configurations are separated on a metric when each has at least 2 finished seeds and their means differ by more
than the larger of their two sample stds (one seed separates nothing). The metrics, in order: the optimized
metric (or --metric), then steps_to_solve (lower is better; when every finished job of the lead solved the task),
then val/loss, each narrowing the lead to the configurations not separated from its best mean; when every job
stopped at the step it solved the task (global_step == steps_to_solve), their final metrics were all measured at
the solve threshold and only steps_to_solve ranks them. A line under the tables says "best: ..." (its cells get
a ★, its bar is green) or "no best: ... not separated by n seeds".

With --metric head_score/<kind>/max (a kind of attention_lab.analysis.head_scores.HEAD_SCORE_KINDS), a column holds each run's
highest score of that kind over all its layers and heads; --metric ablation/<how>/<metric>/layer<l>/<head<h>|all>
ranks the runs by what switching that head off cost them (largest first).

A folder of several sweeps (outputs/multirun/<date>) is reviewed as one table when its sweeps set the same
settings on their command lines (heads=1,2 one morning, heads=4,8 later), said in one "pooled ..." line that names
them; sweeps that set different settings are refused in one line that names each: pass one sweep's dir.

Prints a table (job, its overrides, final validation metrics, parameter count, steps, wall time,
status, error), then one "folded: ..." line per combination of the sweep that was not run because a job trains
the same run (`-m model=self,multihead heads=1,2`: self has one head), the Seeds table (several seeds per
configuration) and the line on which configuration is the best, and writes beside the sweep's jobs:
  compare.csv   raw values, one row per job ("best": a job of the best configuration)
  compare.md    the table in Markdown, and the line on which configuration is the best
  compare.png   one bar per configuration: the mean over its seeds (error bar: their std) of the metric that
                ranked them; when none did, of the optimized metric, or, when every job ties on it (all
                val/seq_acc 1.000) or stopped when it solved the task, of steps_to_solve, else val/loss; the title
                says why, and the best configuration, or that there is none
  compare_groups.csv   with several seeds per configuration: mean, std and n per configuration
                       (compare.md then has a second section, "Seeds")
  heads.md      with --heads KIND[,KIND...]: which heads matter, the detector scores, ablation drops and patching
                of each layer's heads ranked by KIND (one per layer, the last for the rest), mean ± std over seeds
  compare_best_of.md  with --best-of SETTING (e.g. lr, for experiment=mqar): the setting folded, each cell (the jobs
                equal but for it and seed) standing as its value with the best mean of --metric, named, with how
                many values had a result (Zoology reports the best of four learning rates per cell), and the
                values its seeds do not separate from it: "0.003 (not separated from 0.01)"
  formation.png with --plot: loss, best previous-token score and prefix matching against the step, one line
                per seed, each run's formation step marked (runs that recorded their history: induction_formation)
  loss_by_index.png  with --plot: each job's validation loss by target index over training, a step x index
                heatmap per job (Olsson et al.'s picture), where the jobs recorded it
Everything comes from what the sweep wrote: sweep_summary.json, each job's run_info.json,
metrics.json and .hydra/ files, and Hydra's multirun.yaml. Status: as recorded (ok, failed,
interrupted, running); ok when metrics.json exists; failed when a running job's process is gone;
stale when a job has no record and nothing was written for --stale-minutes.

A record that cannot be read (not JSON or YAML, a field of the wrong type) is left out and named in one
"warning:" line on stderr, in the job's error cell and under compare.md's table; the rest is reported. NaN
and infinite metrics are shown as nan/inf, have no mean and are never the best. Cells are escaped for where they go: CSV
text that a spreadsheet would run as a formula (=, +, -, @, tab, CR first) starts with an apostrophe,
Markdown cells escape | and HTML, and the console shows rich markup as text and control characters (a
terminal's escape sequences) as spaces. Each file is replaced, never written through: a compare.csv that is a
link to a file elsewhere becomes a file of its own, and that file is left as it is.
"""

import argparse
import sys

from attention_lab.errors import ReviewError
from attention_lab.review.cli import REVIEW_FAILURES, failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="compare.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sweep", help="sweep directory (hydra.sweep.dir), e.g. outputs/multirun/<date>/<time>; a "
                        "folder of sweeps that set the same settings is pooled")
    parser.add_argument("--metric", help="the metric that ranks the configurations first, shown first (default: the sweep's "
                        "optimized_metric); also head_score/<kind>/max, ablation/<how>/<metric>/layer<l>/<head<h>|all>")
    parser.add_argument("--plot", action="store_true",
                        help="also draw formation.png: the head scores and loss against the step (induction_formation)")
    parser.add_argument("--out", metavar="DIR", help="where compare.csv/.md/.png go (default: the sweep directory)")
    parser.add_argument("--stale-minutes", type=float, default=30.0,
                        help="a job without metrics and without writes for this long is 'stale' (default 30)")
    parser.add_argument("--heads", metavar="KIND[,KIND...]",
                        help="also write heads.md: each layer's heads ranked by that head score (one kind per layer, "
                             "the last for the rest), their scores, ablation drops and patching, mean ± std over seeds")
    parser.add_argument("--best-of", metavar="SETTING",
                        help="also write compare_best_of.md: the jobs that differ only in SETTING (and seed) as one "
                             "cell, the value with the best mean of --metric standing for it (e.g. lr)")
    args = parser.parse_args(argv)
    sweep_arg = args.sweep

    from rich.console import Console

    from attention_lab.records.escape import console as printable
    from attention_lab.review.cli import output_dir, written, written_text
    from attention_lab.review.compare import folded_lines, rich_group_table, rich_table, show_groups, write_reports
    from attention_lab.review.sweep import collect_sweep, seed_groups
    from attention_lab.review.verdict import rank

    try:
        sweep = collect_sweep(sweep_arg, metric=args.metric, stale_minutes=args.stale_minutes)
        out = output_dir(args.out, default=sweep.dir)  # before anything is printed
        for line in sweep.problems:
            print(printable(f"warning: {line}"), file=sys.stderr)
        console = Console(width=None if sys.stdout.isatty() else 200)
        groups = seed_groups(sweep)
        verdict = rank(sweep, groups)
        if sweep.pooled:  # a date folder of several sweeps
            console.print(printable(sweep.pooled), highlight=False, markup=False, soft_wrap=True)
        console.print(rich_table(sweep, verdict))
        for line in folded_lines(sweep):
            console.print(printable(line), highlight=False, markup=False)
        if show_groups(groups):
            console.print(rich_group_table(sweep, groups, verdict))
        if verdict.line():  # which configuration is the best, or that the seeds separate none
            console.print(printable(verdict.line()), highlight=False, markup=False, soft_wrap=True)
        paths = write_reports(sweep, out)
        if args.heads:
            from attention_lab.analysis.tags import HEAD_SCORE_KINDS
            from attention_lab.review.heads_table import heads_markdown

            ranking = [kind.strip() for kind in args.heads.split(",")]
            unknown = [kind for kind in ranking if kind not in HEAD_SCORE_KINDS]
            if unknown:
                raise ReviewError(f"--heads {args.heads} is invalid: {unknown[0]} is not a head score; choose among "
                                  f"{', '.join(HEAD_SCORE_KINDS)}")
            table = heads_markdown(sweep, ranking)
            paths["heads"] = written_text(out / "heads.md", table)
            console.print(printable(table), highlight=False, markup=False)
        if args.best_of:
            from attention_lab.review.best_of import best_markdown, best_of, checked_setting

            checked_setting(groups, args.best_of)
            cells = best_of(groups, args.best_of, sweep.metric, sweep.direction)
            table = best_markdown(sweep, cells, args.best_of)
            paths["best_of"] = written_text(out / "compare_best_of.md", table)
            console.print(printable(table), highlight=False, markup=False)
        if args.plot:
            from attention_lab.review.formation_plot import formation_figure

            paths["formation"] = written(out / "formation.png", lambda tmp: formation_figure(sweep, tmp))
            from attention_lab.review.loss_by_index_figure import loss_by_index_figure, recorded

            if any(recorded(job) for job in sweep.jobs):
                paths["loss_by_index"] = written(out / "loss_by_index.png",
                                                 lambda tmp: loss_by_index_figure(sweep, tmp))
    except REVIEW_FAILURES as err:
        return failed(err, parser.prog, sweep_arg)
    console.print(printable("wrote " + ", ".join(str(p) for p in paths.values())), highlight=False, markup=False,
                  soft_wrap=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
