#!/usr/bin/env python
"""Attention maps of any sentence from a trained run.

    python scripts/visualize.py outputs/runs/<date>/<time> --text "Your journey starts with one step"
    python scripts/visualize.py <run dir> --text "..." --tensorboard     # also add the maps to the run's TensorBoard
    python scripts/visualize.py <run dir> --text "..." --out somewhere/  # instead of <run>/visualize/

Loads the run's last checkpoint (the model its metrics.json describes; <run>/checkpoints/best.ckpt
for the best validation) and its composed config, runs the text and writes, under a new name (<slug of text>-<timestamp>, never overwriting):
  <name>.png   heatmap grid, rows = layers, columns = heads, words on both axes
  <name>.html  interactive head view (choose layer/head, hover for weights); opens offline
Words outside the run's vocabulary become <unk>, with a warning. torch is imported after parsing,
and after checking the run and --out. The checkpoint is loaded as data (weights_only): one that
needs to unpickle code is refused. The run dir is data too: a visualize/ (with --tensorboard, a tensorboard/) in it
that links elsewhere is refused, and each file is written as a new file, never through a link.
"""

import sys

from attention_lab.review.cli import REVIEW_FAILURES, ReviewArgumentParser, failed, setup_logging


def main(argv: list[str] | None = None) -> int:
    parser = ReviewArgumentParser(prog="visualize.py", description=__doc__)
    parser.add_argument("run", nargs="?", metavar="RUN",
                        help="run directory (hydra.run.dir, or a sweep's job dir), or one of its checkpoints")
    parser.add_argument("--text", help="the sentence to run (left out: the run's probe, as TensorBoard showed it)")
    parser.add_argument("--tensorboard", action="store_true", help="also add the maps to <run>/tensorboard")
    parser.add_argument("--out", metavar="DIR", help="output directory (default: <run>/visualize)")
    argv = sys.argv[1:] if argv is None else list(argv)
    old = [a for n, a in enumerate(argv) if a.startswith(("run=", "text=")) and (n == 0 or argv[n - 1] != "--text")]
    if old:  # Hydra's key=value grammar, as scripts/train.py takes it
        parser.error(f"{old[0]} is invalid: give the run dir as it is and the sentence as --text, e.g. "
                     "python scripts/visualize.py outputs/runs/<date>/<time> --text \"...\"")
    args = parser.parse_args(argv)
    if args.run is None:
        parser.error("a run dir is required: python scripts/visualize.py <run dir> --text \"...\"")
    setup_logging()
    from attention_lab.records.escape import console
    from attention_lab.review.visualize import visualize

    try:  # path and --out errors come before the heavy imports
        result = visualize(args.run, args.text, out=args.out, tensorboard=args.tensorboard)
    except REVIEW_FAILURES as err:
        return failed(err, parser.prog, args.run)
    maps = result["maps"]
    lines = [f"checkpoint: {result['checkpoint']} (step {result['step']})",
             f"input:      {' '.join(maps.words)}",
             f"prediction: {' '.join(maps.predictions)}",  # the run's vocabulary: data, as its dir name
             f"grid:       {result['png']}  ({maps.layers} layers x {maps.heads} heads)",
             f"head view:  {result['html']}"]
    if "tensorboard" in result:
        lines.append(f"tensorboard: {result['tensorboard']} (tags visualize/{result['png'].stem}/...)")
    for line in lines:
        print(console(line))
    return 0


if __name__ == "__main__":
    sys.exit(main())
