#!/usr/bin/env python
"""The recall race's two pictures: accuracy against the state per layer, and steps to solve against it, one line
per mixer (each point a mixer at a width; each seed's best learning rate and rung of the ladder).

    python scripts/plot_race.py                                   # from docs/results/recall_race.json into docs/images
    python scripts/plot_race.py --sweep outputs/multirun/<date>/<time> --out reports/   # a race sweep that ran

Writes mqar_accuracy_vs_state.png and mqar_steps_vs_state.png. The table beside them in docs/experiments.md is
written by `make docs` from the same results file; `python scripts/findings.py check recall_race --sweep DIR
--record` records a sweep's jobs there. Reads only records, no torch import.
"""

import sys
from pathlib import Path

from attention_lab.review.cli import REVIEW_FAILURES, ReviewArgumentParser, failed

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = ReviewArgumentParser(prog="plot_race.py", description=__doc__)
    parser.add_argument("--sweep", nargs="+", metavar="DIR", help="race sweep dirs to read instead of the recorded "
                        "results (read only)")
    parser.add_argument("--out", metavar="DIR", help="where the PNGs go (default: docs/images, or the first sweep dir)")
    args = parser.parse_args(argv)

    from attention_lab.findings.errors import FindingError
    from attention_lab.findings.race_plots import race_plots
    from attention_lab.findings.race_table import race_finding
    from attention_lab.findings.records import read_results, results_path, sweep_records
    from attention_lab.review.cli import output_dir, written

    finding = race_finding()
    try:
        if args.sweep:
            dirs = [Path(d) for d in args.sweep]
            missing = [d for d in dirs if not d.is_dir()]
            if missing:
                raise FindingError("--sweep", str(missing[0]), "a sweep directory (hydra.sweep.dir of train.py -m)")
            records, problems = sweep_records(finding, dirs)
            for line in problems:
                print(f"warning: {line}", file=sys.stderr)
            what, default = dirs[0].name, dirs[0]
        else:
            recorded = read_results(ROOT, finding)
            if recorded is None:
                raise FindingError("the recorded results", str(results_path(ROOT, finding)),
                                   "a results file (findings.py check recall_race --sweep DIR --record), or --sweep")
            records, what, default = recorded[0], results_path(ROOT, finding).name, ROOT / "docs" / "images"
        out = output_dir(args.out, default=default)
        for name, write in race_plots(records, finding.best_of, what).items():
            print(f"wrote {written(out / name, write)}")
    except REVIEW_FAILURES as err:
        return failed(err, "plot_race.py", args.sweep[0] if args.sweep else "docs/results")
    return 0


if __name__ == "__main__":
    sys.exit(main())
