#!/usr/bin/env python
"""Attention maps of any sentence from a trained run.

    python scripts/visualize.py run=outputs/runs/<date>/<time> text="Your journey starts with one step"
    python scripts/visualize.py run=... text="..." --tensorboard     # also add the maps to the run's TensorBoard
    python scripts/visualize.py run=... text="..." --out somewhere/  # instead of <run>/visualize/

Loads the run's last checkpoint (the model its metrics.json describes; run=<run>/checkpoints/best.ckpt
for the best validation) and its composed config, runs the text and writes, under a new name (<slug of text>-<timestamp>, never overwriting):
  <name>.png   heatmap grid, rows = layers, columns = heads, words on both axes
  <name>.html  interactive head view (choose layer/head, hover for weights); opens offline
Words outside the run's vocabulary become <unk>, with a warning. torch is imported after parsing,
and after checking the run and --out. The checkpoint is loaded as data (weights_only): one that
needs to unpickle code is refused.
"""

import sys

from attention_lab.review.cli import KeyValueParser, ReviewError, setup_logging


def main(argv: list[str] | None = None) -> int:
    parser = KeyValueParser(prog="visualize.py", description=__doc__, keys=("run", "text"))
    parser.add_argument("--tensorboard", action="store_true", help="also add the maps to <run>/tensorboard")
    parser.add_argument("--out", metavar="DIR", help="output directory (default: <run>/visualize)")
    values, args = parser.parse_key_values(argv)
    if "run" not in values:
        parser.error("run=<run dir> is required, e.g. run=outputs/runs/<date>/<time>")
    setup_logging()
    from attention_lab.review.visualize import visualize

    try:  # path and --out errors come before the heavy imports
        result = visualize(values["run"], values.get("text"), out=args.out, tensorboard=args.tensorboard)
    except ReviewError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    maps = result["maps"]
    print(f"checkpoint: {result['checkpoint']} (step {result['step']})")
    print(f"input:      {' '.join(maps.words)}")
    print(f"prediction: {' '.join(maps.predictions)}")
    print(f"grid:       {result['png']}  ({maps.layers} layers x {maps.heads} heads)")
    print(f"head view:  {result['html']}")
    if "tensorboard" in result:
        print(f"tensorboard: {result['tensorboard']} (tags visualize/{result['png'].stem}/...)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
