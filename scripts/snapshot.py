#!/usr/bin/env python
"""An offline HTML snapshot of a run's attention tab: every logged step, in one file.

    python scripts/snapshot.py outputs/runs/<date>/<time>
    python scripts/snapshot.py <run dir> --out somewhere/run.html

Reads the run's TensorBoard records as the attention tab reads them (the probe's maps at every logged step, and
the head scores, ablations, patching and circuits logged at or before each) and writes one HTML page that shows them with
the tab's own code: the step slider, every head's map, the enlarged head and its head view, the score tables,
and SVG · PNG · CSV downloads under each. Everything is inside the file (data, script, style): it opens from
disk with no TensorBoard and no network, to mail or attach to a report. It needs no checkpoint. A bad run
dir is one line, answered before torch is imported.

Written to <run>/visualize/snapshot-<timestamp>.html (never overwriting), or to --out. The run dir is data: a
visualize/ in it that links elsewhere is refused, and the page is written as a new file, never through a link.
"""

import sys

from attention_lab.review.cli import REVIEW_FAILURES, ReviewArgumentParser, failed, setup_logging


def main(argv: list[str] | None = None) -> int:
    parser = ReviewArgumentParser(prog="snapshot.py", description=__doc__)
    parser.add_argument("run", nargs="?", metavar="RUN",
                        help="run directory (hydra.run.dir, or a sweep's job dir) holding tensorboard/")
    parser.add_argument("--out", metavar="FILE.html",
                        help="the page to write (an existing directory: a new snapshot-<timestamp>.html in it; "
                             "default: <run>/visualize/)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.run is None:
        parser.error("a run dir is required: python scripts/snapshot.py <run dir>")
    setup_logging()
    from attention_lab.records.escape import console
    from attention_lab.tensorboard_plugin.snapshot import snapshot

    try:
        result = snapshot(args.run, out=args.out)
    except REVIEW_FAILURES as err:
        return failed(err, parser.prog, args.run)
    for label, steps in result["runs"]:
        print(console(f"run:      {label} ({len(steps)} logged steps, {steps[0]} to {steps[-1]})"))
    print(console(f"snapshot: {result['path']}"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
