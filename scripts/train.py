#!/usr/bin/env python
"""Train an attention model on a sentence task.

    python scripts/train.py                              # default experiment
    python scripts/train.py model=multihead heads=3      # any override
    python scripts/train.py -m model=self,multihead heads=1,2,4   # sweep
    python scripts/train.py --help                       # every config group and knob

Heavy libraries (torch, lightning) are imported inside main(), so --help and config errors are fast.
"""

import sys

import hydra
from omegaconf import DictConfig

from attention_lab.config import ConfigError, register_configs

register_configs()


@hydra.main(version_base="1.3", config_path="../configs", config_name="train")
def main(cfg: DictConfig) -> float:
    from attention_lab.train import train

    try:
        return train(cfg)
    except ConfigError as err:
        sys.exit(f"error: {err}")


if __name__ == "__main__":
    main()
