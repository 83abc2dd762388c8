"""The trainer settings that Lightning itself refuses only when the Trainer is built, after the run dir exists,
asked of Lightning's own public registries and parsers first, so that a wrong one is one line naming the setting
and what is allowed:

- ``trainer.accelerator`` and ``trainer.strategy`` against ``AcceleratorRegistry`` and ``StrategyRegistry``
  (:func:`check_trainer_names`, a config rule: a sweep checks it for every job before the first starts);
- ``trainer.devices`` as the run's accelerator parses it (its ``parse_devices``: ``trainer.devices=-1`` or a
  list is refused on the CPU), once the accelerator is known (:func:`check_devices`, with the machine checks).

Lightning is imported only when the config names an accelerator or a strategy (a trainer preset such as
``trainer=cpu`` or ``trainer=ddp_sim``, or an override), or for the machine checks of a run about to train: the
default trainer names neither (the ``device`` knob picks the accelerator), so a config error of a plain command
line stays as quick as it was.
"""

from __future__ import annotations

import os
from typing import Any

from omegaconf import DictConfig, OmegaConf

from attention_lab.errors import ConfigError
from attention_lab.names import did_you_mean

# The Trainer takes these besides the registered names: "auto" for both, and "gpu" for whichever GPU
# accelerator the machine has (Lightning's Trainer docs, `accelerator` and `strategy`).
ACCELERATOR_ALIASES = ("auto", "gpu")
STRATEGY_ALIASES = ("auto",)
# Lightning registers each DDP strategy twice more, with these endings: the error line names them once, so that the
# whole list fits in it. Only the line is shortened; what is allowed is the registry's.
VARIANT_ENDINGS = ("_find_unused_parameters_true", "_find_unused_parameters_false")
# The accelerator as the checks resolve it (run/preflight.py's resolve_accelerator: "gpu" is CUDA's), by the name
# Lightning registers it under.
REGISTERED_AS = {"gpu": "cuda"}
DEVICES_ALLOWED = {"cpu": "a positive number of processes, or auto"}
DEVICES_ALLOWED_ELSEWHERE = "a number of devices or a list of device indices that torch sees here, -1 (all) or auto"


def named(trainer: DictConfig) -> dict[str, str]:
    """The trainer's accelerator and strategy given as names (a Strategy object given by ``_target_`` is not a
    name), by setting."""
    settings = {f"trainer.{key}": trainer.get(key) for key in ("accelerator", "strategy")}
    return {setting: value for setting, value in settings.items() if isinstance(value, str)}


def allowed_names() -> dict[str, tuple[str, ...]]:
    """What Lightning accepts for each setting, sorted."""
    from lightning.pytorch.accelerators import AcceleratorRegistry
    from lightning.pytorch.strategies import StrategyRegistry

    return {"trainer.accelerator": tuple(sorted({*ACCELERATOR_ALIASES, *AcceleratorRegistry.available_accelerators()})),
            "trainer.strategy": tuple(sorted({*STRATEGY_ALIASES, *StrategyRegistry.available_strategies()}))}


def listed(names: tuple[str, ...]) -> str:
    """``names`` for an error line, a name registered with each of :data:`VARIANT_ENDINGS` said once."""
    bases = [name for name in names if all(name + ending in names for ending in VARIANT_ENDINGS)]
    variants = {base + ending for base in bases for ending in VARIANT_ENDINGS}
    text = ", ".join(name for name in names if name not in variants)
    if not bases:
        return text
    common = os.path.commonprefix(VARIANT_ENDINGS)
    endings = common + "|".join(ending.removeprefix(common) for ending in VARIANT_ENDINGS)
    return f"{text} ({', '.join(bases)} also with {endings})"


def check_trainer_names(trainer: DictConfig) -> None:
    """Raises a ConfigError for an accelerator or strategy name that Lightning does not know."""
    given = named(trainer)
    if not given:
        return
    allowed = allowed_names()
    for setting, value in given.items():
        if value not in allowed[setting]:
            raise ConfigError(f"{setting}={value} is invalid: choose one of {listed(allowed[setting])}"
                              f"{did_you_mean(value, allowed[setting], f'{setting}=')}")


def check_devices(devices: Any, accelerator: str) -> None:
    """Raises a ConfigError for a ``trainer.devices`` that ``accelerator``'s own parser refuses ("auto" is the
    Trainer's own, before any parser)."""
    name = REGISTERED_AS.get(accelerator, accelerator)
    if devices == "auto" or name == "auto":
        return
    from lightning.fabric.utilities.exceptions import MisconfigurationException
    from lightning.pytorch.accelerators import AcceleratorRegistry

    value = OmegaConf.to_object(devices) if OmegaConf.is_list(devices) else devices
    try:
        type(AcceleratorRegistry.get(name)).parse_devices(value)
    except (TypeError, ValueError, MisconfigurationException) as err:
        shown = f"[{','.join(map(str, value))}]" if isinstance(value, list) else value  # as it is typed
        raise ConfigError(f"trainer.devices={shown} is invalid on the {name} accelerator: use "
                          f"{DEVICES_ALLOWED.get(name, DEVICES_ALLOWED_ELSEWHERE)}") from err
