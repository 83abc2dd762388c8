#!/usr/bin/env python
"""TensorBoard on the lab's runs, showing every step they logged.

    python scripts/start_tensorboard.py                                  # the newest sweep under outputs/
    python scripts/start_tensorboard.py outputs                          # every run and sweep job under outputs/
    python scripts/start_tensorboard.py outputs/multirun/<date>/<time>   # one sweep: its HParams table alone
    python scripts/start_tensorboard.py outputs/runs/<date>/<time> --port 6007   # other flags go to TensorBoard

TensorBoard keeps 10 steps of each image and text tag by default and drops the rest without a word (maps drawn
every 25 steps with callbacks.attention_maps.image_every_n_steps=25: 2 of 12 gone; the predictions likewise), and
of the attention tab's record 100 steps a run (10 with --load_fast=false). This starts it with
--samples_per_plugin=attention_lab=0,images=10000,text=10000: every step of any run the lab trains.
attention_lab=0 keeps every step of the attention tab with either loader; images=0 or text=0 would show none at
all (those plugins also ask for at most that many steps), hence 10,000 there. A --samples_per_plugin of your own
replaces all three.
Without a logdir it opens the newest sweep under outputs/ (the sweep whose multirun.yaml changed last), whose HParams
table compares its jobs, and says so with the command that opens everything; with no sweep there, outputs/ itself.
TensorBoard's HParams tab shows one table per logdir, its columns taken from the first run it reads: every run
logs every knob, so a logdir of many sweeps has them all, but a column only one sweep varies (`task.options.delay`) is
there when that sweep is opened alone.
(Not named tensorboard.py: scripts/ is first on the path of every script here, and it would hide the package.)
"""

import argparse
import os
import sys
from pathlib import Path

OUTPUTS = "outputs"  # where scripts/train.py writes its runs and sweeps (configs/hydra/default.yaml)
# Every plugin the lab writes many steps of: the attention tab's tensors (0: keep all, the tab asks for every step
# kept), the maps (images) and predictions (text), whose plugins also ask for at most that many steps (0: none).
STEPS_KEPT = {"attention_lab": 0, "images": 10_000, "text": 10_000}
KEEP_EVERY_STEP = "--samples_per_plugin=" + ",".join(f"{plugin}={steps}" for plugin, steps in STEPS_KEPT.items())


def tensorboard_argv(logdir: Path, flags: list[str]) -> list[str]:
    own_samples = any(flag.split("=")[0] == "--samples_per_plugin" for flag in flags)
    return [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir),
            *([] if own_samples else [KEEP_EVERY_STEP]), *flags]


def newest_sweep(outputs: Path) -> Path | None:
    """The sweep dir under ``outputs`` whose record (Hydra's multirun.yaml) changed last; None when there is none.
    A sweep's own dirs are not searched further."""
    from attention_lab.records.files import MULTIRUN_RECORD

    found: list[Path] = []
    for folder, dirs, files in os.walk(outputs):
        if MULTIRUN_RECORD in files:
            found.append(Path(folder))
            dirs.clear()
    return max(found, key=lambda sweep: ((sweep / MULTIRUN_RECORD).stat().st_mtime, str(sweep)), default=None)


def default_logdir(outputs: Path) -> tuple[Path, str]:
    """What a bare ``start_tensorboard.py`` opens, and the line that says so: the newest sweep, else ``outputs``."""
    from attention_lab.records.commands import script_command

    sweep = newest_sweep(outputs)
    if sweep is None:
        return outputs, f"TensorBoard on every run under {outputs} (no sweep there)"
    return sweep, (f"TensorBoard on the newest sweep, {sweep} (its HParams table compares its jobs); every run and "
                   f"sweep: {script_command('start_tensorboard.py', str(outputs))}")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="start_tensorboard.py", description=__doc__, usage="%(prog)s [LOGDIR] "
                                     "[--logdir=LOGDIR] [TensorBoard's flags]",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--logdir", metavar="LOGDIR", help="outputs/ (default), a run dir or a sweep dir; also "
                        "the first argument")
    # The first argument may be the logdir; everything else that is not --logdir is TensorBoard's (an argparse
    # positional would take the value of a TensorBoard flag, e.g. the 6007 of `--port 6007`).
    positional = argv.pop(0) if argv and not argv[0].startswith("-") else None
    args, flags = parser.parse_known_args(argv)
    if positional and args.logdir:
        print("error: logdir given twice (as the first argument and as --logdir): give one", file=sys.stderr)
        return 2
    given = positional or args.logdir or OUTPUTS
    logdir = Path(given)
    if not logdir.is_dir():
        print(f"error: logdir={given} is not a directory: give outputs/, a run dir or a sweep dir", file=sys.stderr)
        return 2
    if not (positional or args.logdir):
        logdir, note = default_logdir(logdir)
        print(note, file=sys.stderr, flush=True)
    command = tensorboard_argv(logdir, flags)
    os.execv(command[0], command)  # TensorBoard takes this process over: Ctrl-C stops it as usual
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main())
