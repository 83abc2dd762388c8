#!/usr/bin/env python
"""Train an attention model on a sentence task.

    python scripts/train.py                              # default experiment
    python scripts/train.py model=multihead heads=3      # any override
    python scripts/train.py -m model=self,multihead heads=1,2,4   # sweep (summary: <sweep dir>/sweep_summary.json)
    python scripts/train.py resume=outputs/runs/<day>/<time>      # continue an interrupted run
    python scripts/train.py --help                       # every config group and knob

Hydra composes the config for the run (twice: its own floor); the lab checks that composition in a Hydra callback
before anything is created (a top-level knob of the wrong type: before Hydra starts), and rejects a bad setting
with one `error: ...` line (HYDRA_FULL_ERROR=1 for a traceback). The command line is never rewritten:
`resume=<sweep dir>` relaunches the sweep's own command line.
Heavy libraries (torch, lightning) are imported only once training starts, so --help and config errors are fast.
"""

from pathlib import Path

import hydra
from omegaconf import DictConfig

from attention_lab.config import register_configs
from attention_lab.run import cli

CONFIG_DIR = Path(__file__).resolve().parents[1] / "configs"
register_configs()
cli.register_help()  # ${lab.help:} in configs/hydra/help/lab.yaml


@hydra.main(version_base="1.3", config_path=str(CONFIG_DIR), config_name="train")
def main(cfg: DictConfig) -> float | None:
    from attention_lab.run.task import run_task

    return run_task(cfg)


if __name__ == "__main__":
    cli.main(main, CONFIG_DIR, script=Path(__file__).resolve())
