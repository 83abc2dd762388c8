"""trainer.accelerator and trainer.strategy are checked against Lightning's own registries, and trainer.devices
against the accelerator's own parser, before a run dir exists (tests/e2e/test_errors.py runs the command lines); here:
what is refused is what Lightning's Trainer refuses, the error line lists every name, and the default trainer
names none (so a plain command line's config checks import no Lightning)."""

from __future__ import annotations

import re

import lightning as L
import pytest
from lightning.fabric.utilities.exceptions import MisconfigurationException
from lightning.pytorch.accelerators import AcceleratorRegistry
from lightning.pytorch.strategies import StrategyRegistry
from omegaconf import OmegaConf

from attention_lab.errors import ConfigError
from attention_lab.trainer_rules import (
    VARIANT_ENDINGS,
    allowed_names,
    check_devices,
    check_trainer_names,
    listed,
    named,
)
from conftest import compose_config


def test_every_registered_name_passes():
    for name in ("auto", "gpu", *AcceleratorRegistry.available_accelerators()):
        check_trainer_names(OmegaConf.create({"accelerator": name}))
    for name in ("auto", *StrategyRegistry.available_strategies()):
        check_trainer_names(OmegaConf.create({"strategy": name}))


@pytest.mark.parametrize("trainer", [{"accelerator": "cpuu"}, {"accelerator": "cpu", "strategy": "dp_fork"}],
                         ids=["accelerator", "strategy"])
def test_a_refused_name_is_one_that_lightning_refuses_too(trainer):
    with pytest.raises(ConfigError):
        check_trainer_names(OmegaConf.create(trainer))
    with pytest.raises(ValueError):  # Lightning's own refusal, when the Trainer is built
        L.Trainer(logger=False, enable_checkpointing=False, **trainer)


def test_the_line_lists_every_name():
    for setting, names in allowed_names().items():
        text = listed(names)
        plain, _, folded = text.partition(" (")
        shown = set(plain.split(", "))
        if folded:
            bases, _, _ = folded.partition(" also with ")
            shown |= {f"{base}{ending}" for base in bases.split(", ") for ending in VARIANT_ENDINGS}
        assert shown == set(names), setting
        assert not re.search(r"\s{2,}", text)


def test_the_default_trainer_names_no_accelerator_or_strategy():
    assert named(compose_config([]).trainer) == {}
    assert named(compose_config(["trainer=ddp_sim"]).trainer) == {"trainer.accelerator": "cpu",
                                                                  "trainer.strategy": "ddp_fork"}


@pytest.mark.filterwarnings("ignore::lightning.fabric.utilities.warnings.PossibleUserWarning")  # srun: as in train.py
@pytest.mark.parametrize("devices", [1, 2, "3", "auto", -1, 0, [0], [0, 1]])
def test_devices_on_the_cpu_are_refused_where_lightnings_trainer_refuses_them(devices):
    try:
        L.Trainer(accelerator="cpu", devices=devices, logger=False, enable_checkpointing=False)
    except (TypeError, ValueError, MisconfigurationException):
        refused_by_lightning = True
    else:
        refused_by_lightning = False
    value = OmegaConf.create({"devices": devices}).devices
    if refused_by_lightning:
        with pytest.raises(ConfigError, match=r"trainer\.devices=.* is invalid on the cpu accelerator"):
            check_devices(value, "cpu")
    else:
        check_devices(value, "cpu")
