"""The training config that ``scripts/train.py`` composes from given overrides (Hydra's compose API)."""

from __future__ import annotations

from omegaconf import DictConfig

from benchmarks.processes import ROOT


def compose_train_config(overrides: list[str]) -> DictConfig:
    from hydra import compose, initialize_config_dir

    from attention_lab.config import register_configs

    register_configs()
    with initialize_config_dir(config_dir=str(ROOT / "configs"), version_base="1.3"):
        return compose("train", overrides=overrides)
