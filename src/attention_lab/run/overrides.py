"""Command-line overrides as text (which arguments are overrides, the key each one sets, a run's name from them),
and Hydra's Compose API around the project's configs outside a running Hydra app (:func:`hydra_compose_api`): the
checks of ``resume=<sweep dir>`` before the sweep is relaunched (:mod:`.sweep_resume`), and configs composed
in-process. (Inside the app, Hydra is initialised already: :mod:`.preflight` calls ``hydra.compose`` directly.)"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from attention_lab.config import register_configs
from attention_lab.records.files import MULTIRUN_RECORD


def is_override(arg: str) -> bool:
    return not arg.startswith("-") and ("=" in arg or arg.startswith("~"))


def override_key(override: str) -> str:
    """`+task.max_len=6` -> `task.max_len`."""
    return override.split("=", 1)[0].lstrip("+~")


def overrides_as_typed(hydra_cfg: DictConfig, *kinds: str) -> list[str]:
    """The command line's overrides of ``kinds`` (``"hydra"``, ``"task"``) from Hydra's settings, as typed. Read
    without resolving: an interpolation in one stays text (a resumed Optuna sweep's
    ``hydra.sweep.subdir='${lab.job_subdir:${hydra.job.num},2}'``, which cannot resolve before a job exists)."""
    return [str(o) for kind in kinds for o in OmegaConf.to_container(hydra_cfg.overrides[kind], resolve=False)]


def resume_value(argv: Sequence[str]) -> str | None:
    """The last ``resume=`` of a command line, as typed."""
    values = [arg.split("=", 1)[1] for arg in argv if arg.startswith("resume=")]
    return values[-1] if values else None


# The sweepers whose jobs are the product of the sweep's values, by their option name in hydra/sweeper: the lab's
# (src/hydra_plugins/attention_lab_sweeper, the default) and Hydra's own.
PRODUCT_SWEEPER, BASIC_SWEEPER = "product", "basic"
LADDER_SWEEPER = "ladder"  # the lab's budget ladder: a product, run in rungs of growing max_steps
# The lab's sweepers, which check their own jobs in the compositions of their plan and then claim the sweep dir
# (the preflight and dir-claiming callbacks leave a sweep of theirs to them).
SELF_CHECKING_SWEEPERS = (PRODUCT_SWEEPER, LADDER_SWEEPER)


def sweeper_of(cfg: DictConfig) -> str | None:
    """The hydra/sweeper option a sweep's config chose (``product``, ``basic``, ``optuna``)."""
    return OmegaConf.select(cfg, "hydra.runtime.choices.hydra/sweeper")


def is_sweep_dir(value: Any) -> bool:
    """Whether a ``resume=`` value names a sweep dir (one with Hydra's record of a sweep) rather than a run dir."""
    return bool(value) and (Path(str(value)).expanduser() / MULTIRUN_RECORD).is_file()


# Settings that change how a run is shown or where it runs, not what it trains: left out of its name. Not `probe`:
# runs that differ in it alone show different maps, and TensorBoard tells them apart by their names.
NOT_IN_NAME = ("resume", "hydra", "trainer.enable_progress_bar", "callbacks", "logger", "threads",
               "device", "log_attention_every_n_steps", "num_predictions_logged", "tags")


def run_name(overrides: list[str], limit: int = 150) -> str:
    """``model=multihead,heads=3``: the run's own overrides, as TensorBoard's name for it ("" for none)."""
    kept = [o.lstrip("+~") for o in overrides
            if not any(override_key(o) == k or override_key(o).startswith((k + ".", k + "/")) for k in NOT_IN_NAME)]
    name = ",".join(kept).replace("/", "_")
    return name if len(name) <= limit else name[: limit - 1] + "…"


@contextlib.contextmanager
def hydra_compose_api(config_dir: Path) -> Iterator[None]:
    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            yield
    finally:
        GlobalHydra.instance().clear()
