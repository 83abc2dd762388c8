"""``resume=<run dir>``: continue a run in its own dir, with its own config.

A run dir is data, never code. Its ``.hydra/overrides.yaml`` is read as YAML, must be a list of plain
overrides with literal values that touch no ``hydra.*`` setting, and the config they compose may only instantiate
the ``_target_`` classes that the project's own config files name (:mod:`.replay`). Overrides that would change the model or the
task are rejected. Nothing in the run dir changes until the resumed run has started.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import DictConfig, OmegaConf, open_dict

from attention_lab.errors import ConfigError
from attention_lab.run import replay
from attention_lab.run.contained import check_contained
from attention_lab.run.files import (
    METRICS,
    SAVED_CONFIG,
    SAVED_OVERRIDES,
    UnreadableRecord,
    read_yaml_record,
    save_yaml,
)
from attention_lab.run.overrides import override_key

KEPT_ON_RESUME = ("model", "task")  # what a resumed run may not change
FURTHER_TRAINING = ("max_steps", "max_epochs", "trainer.max_steps", "trainer.max_epochs")


@dataclass
class ResumePlan:
    run_dir: Path
    setting: str  # `resume=<as typed>`, for messages
    saved: list[str]  # the run's own overrides
    extra: list[str] = field(default_factory=list)  # this command's other overrides

    @property
    def overrides(self) -> list[str]:
        """The run's overrides, then this command's (a setting given again replaces the saved one)."""
        replaced = {override_key(o) for o in self.extra}
        return [o for o in self.saved if override_key(o) not in replaced] + self.extra

    @property
    def compose_overrides(self) -> list[str]:
        return [*self.overrides, f"resume={self.run_dir}"]


def read_saved_overrides(run_dir: Path, setting: str) -> list[str]:
    path = run_dir / SAVED_OVERRIDES
    if not path.is_file():
        raise ConfigError(f"{setting} is invalid: {run_dir} is not a run dir (no {SAVED_OVERRIDES} there)")
    try:
        saved = read_yaml_record(path)
    except UnreadableRecord as err:  # the run dir is damaged
        raise ConfigError(f"{setting} is invalid: {path} is unreadable: {err.problem}") from None
    if not isinstance(saved, list) or not all(isinstance(o, str) for o in saved):
        raise ConfigError(f"{setting} is invalid: {path} is not a list of overrides")
    for override in replay.check_overrides(saved, setting, path):
        key = override.key_or_group
        if key.split(".")[0].split("/")[0] in ("hydra", "resume") or override.is_sweep_override():
            raise ConfigError(f"{setting} is invalid: {path} sets '{override.input_line}', which no run records; "
                              "the run dir was changed by hand and is not resumed")
    return saved


def plan_resume(value: str, command_overrides: Sequence[str]) -> ResumePlan:
    setting = f"resume={value}"
    run_dir = Path(value).expanduser().resolve()
    saved = read_saved_overrides(run_dir, setting)
    check_contained(run_dir, setting)
    extra = [o for o in command_overrides if override_key(o) != "resume" and not override_key(o).startswith("hydra")]
    if (run_dir / METRICS).exists() and not {override_key(o) for o in extra} & set(FURTHER_TRAINING):
        raise ConfigError(f"{setting} is invalid: that run already finished (see its {METRICS}); "
                          "to train it further, add a larger max_steps, e.g. max_steps=3000")
    return ResumePlan(run_dir, setting, saved, extra)


def check_resumed_config(plan: ResumePlan, resumed: DictConfig, original: DictConfig, baseline: DictConfig,
                         config_dir: Path) -> None:
    """The composed config of a resumed run is one the project's configs allow (:func:`replay.check_config`) and
    keeps its model and task. A corpus the run's overrides name is read from its dir, unless this command
    names it itself."""
    replay.check_config(resumed, baseline, replay.allowed_targets(config_dir), plan.setting)
    if replay.CORPUS not in {override_key(o) for o in plan.extra}:
        replay.check_corpus(resumed, baseline, plan.run_dir, plan.setting)
    for key in KEPT_ON_RESUME:
        before = OmegaConf.to_container(original[key], resolve=True)
        after = OmegaConf.to_container(resumed[key], resolve=True)
        if before != after:
            changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
            given = " ".join(plan.extra) or "the overrides"
            raise ConfigError(f"{given} is invalid with {plan.setting}: it changes {key}."
                              f"{', '.join(changed)} of the run; a resumed run keeps its model and task "
                              "(start a new run instead)")


def compose_resumed(plan: ResumePlan, config_name: str, config_dir: Path) -> DictConfig:
    """The resumed run's config, composed with Hydra's Compose API (initialised by the caller) and checked."""
    from hydra import compose

    resumed = compose(config_name, overrides=plan.compose_overrides, return_hydra_config=True)
    baseline = compose(config_name, overrides=replay.group_choices(plan.overrides), return_hydra_config=True)
    check_resumed_config(plan, resumed, compose(config_name, overrides=plan.saved), baseline, config_dir)
    with open_dict(resumed):
        del resumed["hydra"]  # what the run sees: Hydra's own config is Hydra's
    return resumed


def record(plan: ResumePlan, resumed: DictConfig) -> None:
    """Once the resumed run has started: its overrides and config now include this command's."""
    save_yaml(OmegaConf.create(plan.overrides), plan.run_dir / SAVED_OVERRIDES)
    save_yaml(resumed, plan.run_dir / SAVED_CONFIG)
