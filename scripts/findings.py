#!/usr/bin/env python
"""The findings of docs/experiments.md as code (attention_lab.findings.catalogue): each one's sweep, seeds and
claims, checkable on new seeds or on a sweep that already ran.

    python scripts/findings.py list                                   # each finding: command, seeds, cost, claims
    python scripts/findings.py check smeared_keys --seeds 10-11       # run its sweep on seeds 10 and 11, then check
    python scripts/findings.py check smeared_keys --sweep outputs/multirun/<date>/<time>   # check a sweep that ran
    python scripts/findings.py check sinks --sweep DIR1 DIR2 DIR3 DIR4    # a finding of several sweeps: each dir

Each claim is one line: held or NOT HELD, and the numbers that decided it. "k of n seeds" claims are asked as a
share on another number of seeds (every seed when k = n); a range is the one the docs saw over their seeds, which
new seeds may leave. The exit status is 0 when every claim held, 1 when one did not or the input is bad (one
`error:` line). `check` runs the sweeps with hydra/launcher=parallel (2 jobs at a time) into --out (default
outputs/findings/<name>/<date>_<time>/<i>, one dir per sweep of the finding). `check --record` also writes
docs/results/<name>.json (the per-seed numbers and the commands), from which `make docs` writes the findings table
of docs/experiments.md.
"""

import sys
import time
from pathlib import Path

from attention_lab.review.cli import REVIEW_FAILURES, ReviewArgumentParser, failed

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> int:
    parser = ReviewArgumentParser(prog="findings.py", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True, parser_class=ReviewArgumentParser)
    commands.add_parser("list", help="each finding: its commands, seeds, cost (jobs x seconds per job) and claims")
    check = commands.add_parser("check", help="run a finding's sweep on --seeds (or read --sweep) and check its claims")
    check.add_argument("name", help="the finding (findings.py list names them)")
    check.add_argument("--seeds", help="A-B or A,B,...: the seeds to run (default: the finding's own)")
    check.add_argument("--sweep", nargs="+", metavar="DIR", help="check these sweep dirs instead of running (read only)")
    check.add_argument("--out", metavar="DIR", help="where the sweeps go (default outputs/findings/<name>/<time>)")
    check.add_argument("--record", action="store_true", help="also write docs/results/<name>.json from these jobs")
    args = parser.parse_args(argv)

    from attention_lab.findings.checks import evaluate, find, listing, parse_seeds, report, run_sweeps, sweep_dirs_for
    from attention_lab.findings.claims import shown_seeds
    from attention_lab.findings.errors import FindingError
    from attention_lab.findings.records import sweep_records, write_results

    if args.command == "list":
        try:
            print("\n".join(listing(ROOT)))
        except REVIEW_FAILURES as err:
            return failed(err, "findings.py", "docs/results")
        return 0
    try:  # everything checked before any work starts
        finding = find(args.name)
        if args.sweep and args.seeds:
            raise FindingError("--seeds", args.seeds, "not with --sweep: the sweep's jobs have their seeds")
        seeds = parse_seeds(args.seeds) if args.seeds else finding.seeds
        own = f"the finding's own seeds ({shown_seeds(finding.seeds)}): the results its claims are stated on"
        if args.record and sorted(seeds) != sorted(finding.seeds):
            raise FindingError("--record with --seeds", args.seeds, own)
        if args.sweep:
            dirs = [Path(d) for d in args.sweep]
            missing = [d for d in dirs if not d.is_dir()]
            if missing:
                raise FindingError("--sweep", str(missing[0]), "a sweep directory (hydra.sweep.dir of train.py -m)")
        else:
            out = Path(args.out) if args.out else ROOT / "outputs" / "findings" / finding.name / \
                time.strftime("%Y-%m-%d_%H-%M-%S")
            dirs = run_sweeps(finding, seeds, sweep_dirs_for(finding, out), ROOT)
        records, problems = sweep_records(finding, dirs)
        verdicts = evaluate(finding, records)
        print(report(finding, verdicts, records, problems))
        if args.record:
            recorded = sorted({int(r.seed) for r in records if r.seed.isdigit()})
            if recorded != sorted(finding.seeds):
                raise FindingError("--record of seeds", shown_seeds(recorded) or "none", own)
            when = time.strftime("%Y-%m-%d")
            print(f"recorded: {write_results(ROOT, finding, records, f'rerun {when}', recorded)}")
    except REVIEW_FAILURES as err:
        return failed(err, "findings.py", args.name)
    return 0 if records and all(v.held for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
