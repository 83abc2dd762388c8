"""The jobs of a sweep, known before it starts: which combinations of a product train the same run (folded into
the first of them, see :class:`SweepPlan`), and that no two jobs write to the same dir.

The lab's product sweeper (``hydra/sweeper=product``, the default; src/hydra_plugins/attention_lab_sweeper) runs
the product of the sweep's values, each distinct run once. Hydra's ``basic`` sweeper runs the whole product: there
a sweep whose jobs repeat a run is refused. Either way every job is composed and checked (by the caller's checks:
the config rules, see :mod:`.preflight`) before the first starts.
Other sweepers (Optuna) choose their jobs as they go: each choice of the search space and each bound of a range is
checked once, in a trial the search could ask for (the other settings at their first value or lower bound), and
the job dirs are checked by job number.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hydra import compose
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import IntervalSweep
from omegaconf import DictConfig, OmegaConf, open_dict

from attention_lab.config import FROM_KNOBS
from attention_lab.errors import ConfigError
from attention_lab.records.files import MULTIRUN_RECORD, UnreadableRecord, read_yaml_record, recorded_overrides
from attention_lab.run.overrides import BASIC_SWEEPER, PRODUCT_SWEEPER, override_key, sweeper_of

JOB_DIR_PLACEHOLDER = "<job dir>"  # the job's own dir is no part of what it trains
REFERENCE = re.compile(r"\$\{(\w+)")  # `${heads}` -> heads
# The top-level knobs that only set the model's fields: the code reads cfg.model, never them.
MODEL_KNOBS = {name for interpolation in FROM_KNOBS.values() for name in REFERENCE.findall(interpolation)}


def sweep_variants(overrides: Sequence[str]) -> list[list[str]]:
    """Each value of each sweep override (`heads=1,2,4`) once, the other sweeps at their first value; a range
    that a sweeper samples (`lr=interval(0.001,0.1)`) at its two bounds."""
    base: list[str | None] = []  # one line per override: the override itself, or its sweep's first value
    alternatives: list[tuple[int, str]] = []  # (position in base, another value of that sweep)
    for override in OverridesParser.create().parse_overrides(list(overrides)):
        if not override.is_sweep_override():
            base.append(override.input_line)
            continue
        key = override.get_key_element()
        value = override.value()
        try:
            values = [str(value.start), str(value.end)] if isinstance(value, IntervalSweep) \
                else list(override.sweep_string_iterator())
        except Exception:  # noqa: BLE001 - glob() and the like: the sweeper resolves them, nothing to list here
            values = []
        base.append(f"{key}={values[0]}" if values else None)
        alternatives += [(len(base) - 1, f"{key}={value}") for value in values[1:]]
    variants = [list(base)]
    for position, line in alternatives:
        variants.append([line if i == position else o for i, o in enumerate(base)])
    return [[o for o in variant if o is not None] for variant in variants]


def params_arguments(params: Any) -> list[str]:
    """A sweeper's ``params`` (``{heads: 1,2}``) as the overrides they stand for (``heads=1,2``)."""
    return [f"{key}={value}" for key, value in (params or {}).items()]


def sweep_arguments(cfg: DictConfig, overrides: Sequence[str]) -> list[str]:
    """What the sweeper expands: a preset's ``hydra.sweeper.params``, then the command line's overrides."""
    return params_arguments(OmegaConf.select(cfg, "hydra.sweeper.params")) + list(overrides)


def swept_keys(sweep_dir: Path | None, sweeper_params: Any) -> list[str]:
    """The settings a running sweep varies: its sweeper's params (a preset's, or Optuna's search space) and the
    sweep overrides of its command line, which Hydra's basic sweeper saved in ``<sweep dir>/multirun.yaml``
    (read as data; [] when there is none)."""
    arguments = params_arguments(sweeper_params)
    saved = sweep_dir / MULTIRUN_RECORD if sweep_dir is not None else None
    if saved is not None and saved.is_file():
        try:
            recorded = recorded_overrides(read_yaml_record(saved), "task")
        except (FileNotFoundError, UnreadableRecord):  # a damaged record: show what the job sets instead
            return []
        arguments += [o for o in recorded if isinstance(o, str)] if isinstance(recorded, list) else []
    try:
        parsed = OverridesParser.create().parse_overrides(arguments)
    except Exception:  # noqa: BLE001 - a damaged record: show what the job sets instead
        return []
    return list(dict.fromkeys(override_key(o.input_line) for o in parsed if o.is_sweep_override()))


def planned_jobs(arguments: Sequence[str]) -> list[list[str]]:
    """The basic sweeper's jobs, as it builds them: one list of values per key (an override given again replaces
    the earlier one in its place), then their product."""
    lines: dict[str, list[str]] = {}
    for override in OverridesParser.create().parse_overrides(list(arguments)):
        key = override.get_key_element()
        if override.is_sweep_override():
            lines[key] = [f"{key}={value}" for value in override.sweep_string_iterator()]
        else:
            lines[key] = [f"{key}={override.get_value_element_as_str()}"]
    return [list(job) for job in itertools.product(*lines.values())]


def strings(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for value in node.values():
            yield from strings(value)
    elif isinstance(node, list):
        for value in node:
            yield from strings(value)
    elif isinstance(node, str):
        yield node


def what_it_trains(cfg: DictConfig) -> str:
    """The job's resolved config, without Hydra's settings and without the top-level knobs that only feed other
    settings (``heads`` only sets ``model.num_heads``, which a single-head variant fixes at 1)."""
    cfg = cfg.copy()
    with open_dict(cfg):
        cfg.pop("hydra", None)
        OmegaConf.update(cfg, "paths.output_dir", JOB_DIR_PLACEHOLDER, force_add=True)
    plain = OmegaConf.to_container(cfg, resolve=False)
    fed = ({name for text in strings(plain) for name in REFERENCE.findall(text)} | MODEL_KNOBS) & set(plain)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    for key in fed:
        resolved.pop(key, None)
    return json.dumps(resolved, sort_keys=True, default=str)


def job_subdir(cfg: DictConfig, num: int) -> str:
    with open_dict(cfg):
        cfg.hydra.job.num = num
        cfg.hydra.job.id = str(num)
    return str(cfg.hydra.sweep.subdir)


def job_settings(jobs: Sequence[Sequence[str]]) -> tuple[list[dict[str, str]], list[str]]:
    """Each job's overrides by key, and the keys whose value differs between jobs."""
    settings = [dict(zip(map(override_key, job), job, strict=True)) for job in jobs]
    swept = [key for key in settings[0] if len({s[key] for s in settings}) > 1] if settings else []
    return settings, swept


@dataclass(frozen=True)
class Fold:
    """A combination of a product sweep that would train the same run as an earlier one: it is not launched."""

    overrides: tuple[str, ...]  # the combination, as the sweeper built it
    into: int  # the number of the job that trains its run
    into_overrides: tuple[str, ...]
    shown: str  # what differs between the sweep's combinations, for this one and for the job
    shown_into: str
    reason: str  # "with model=self, nothing reads heads"

    def line(self) -> str:
        return f"folded: {self.shown} into job {self.into} ({self.shown_into}): {self.reason}"

    def as_json(self) -> dict[str, object]:
        return {"overrides": list(self.overrides), "into": self.into, "into_overrides": list(self.into_overrides),
                "reason": self.reason}


@dataclass(frozen=True)
class SweepPlan:
    """The jobs a product sweep launches (job number = position) and the combinations folded into them."""

    jobs: list[list[str]]
    folds: list[Fold]
    kept: list[int]  # for each job, its position in the product


def fold_jobs(product: list[list[str]], fingerprints: Sequence[str]) -> SweepPlan:
    """Each distinct run of ``product`` once, in product order: a combination whose fingerprint (see
    :func:`what_it_trains`) an earlier one has is folded into that one."""
    settings, swept = job_settings(product)
    first: dict[str, int] = {}  # fingerprint -> job number
    jobs: list[list[str]] = []
    kept: list[int] = []
    folds: list[Fold] = []
    for position, (job, fingerprint) in enumerate(zip(product, fingerprints, strict=True)):
        if fingerprint not in first:
            first[fingerprint] = len(jobs)
            jobs.append(job)
            kept.append(position)
            continue
        into = first[fingerprint]
        mine, theirs = settings[position], settings[kept[into]]
        same = [mine[key] for key in swept if mine[key] == theirs[key]]
        differing = [key for key in swept if mine[key] != theirs[key]]
        context = f"with {' '.join(same)}, " if same else ""
        folds.append(Fold(tuple(job), into, tuple(jobs[into]), " ".join(mine[key] for key in swept),
                          " ".join(theirs[key] for key in swept), f"{context}nothing reads {', '.join(differing)}"))
    return SweepPlan(jobs, folds, kept)


def reject_duplicates(jobs: list[list[str]], fingerprints: list[str], arguments: Sequence[str]) -> None:
    """Hydra's basic sweeper runs every combination: a sweep in which two would train the same run is refused."""
    settings, swept = job_settings(jobs)
    groups: dict[str, list[int]] = {}
    for num, fingerprint in enumerate(fingerprints):
        groups.setdefault(fingerprint, []).append(num)
    for nums in (nums for nums in groups.values() if len(nums) > 1):
        same = [key for key in swept if len({settings[n][key] for n in nums}) == 1]
        differing = [key for key in swept if key not in same]
        typed = " ".join(a for a in arguments if override_key(a) in differing)
        shown = " | ".join(" ".join(settings[n][k] for k in differing) for n in nums)
        context = f"with {' '.join(settings[nums[0]][k] for k in same)}, " if same else ""
        raise ConfigError(f"{typed} is invalid in this sweep: {context}jobs {', '.join(map(str, nums))} ({shown}) "
                          "would train the same run, as nothing reads what differs; sweep it where it matters, in "
                          "a sweep of its own")


def reject_shared_dirs(subdirs: list[str], raw: Any) -> None:
    first: dict[str, int] = {}
    for num, subdir in enumerate(subdirs):
        if subdir in first:
            raise ConfigError(f"hydra.sweep.subdir={raw} is invalid: jobs {first[subdir]} and {num} would both write "
                              f"to <sweep dir>/{subdir}; use a subdir that differs per job, such as "
                              "${hydra.job.num} (the default)")
        first[subdir] = num


def shown_jobs(jobs: Sequence[Sequence[str]]) -> list[str]:
    """Each job as its overrides that differ between the jobs (all of them when none differ)."""
    settings, swept = job_settings(jobs)
    return [" ".join(job[key] for key in swept) if swept else " ".join(job.values()) for job in settings]


def check_each(check: Callable[[DictConfig], None], configs: Sequence[DictConfig], where: Sequence[str]) -> None:
    """``check`` on each config; its ConfigError also names the job it is about (``where``), as one line."""
    for cfg, job in zip(configs, where, strict=True):
        try:
            check(cfg)
        except ConfigError as err:
            raise ConfigError(f"{err} (in {job}; no job of the sweep has started)") from err


def subdir_as_typed(sweep_config: DictConfig) -> Any:
    """The sweep's ``hydra.sweep.subdir`` unresolved, as the error about a shared dir shows it."""
    return OmegaConf.to_container(sweep_config.hydra.sweep, resolve=False)["subdir"]


def checked_product(jobs: list[list[str]], composed: Callable[[Sequence[str]], DictConfig],
                    check_job: Callable[[DictConfig], None], check_launched: Callable[[DictConfig], None],
                    sweep_config: DictConfig) -> tuple[SweepPlan, list[DictConfig]]:
    """A product sweep's combinations ``jobs``, each composed once by ``composed`` and passed to ``check_job``;
    those that train the same run folded (:func:`fold_jobs`); the jobs left in dirs of their own, each passed to
    ``check_launched``. Returns the plan and the launched jobs' configs; raises ConfigError. ``sweep_config``:
    the sweep's own config."""
    raw_subdir = subdir_as_typed(sweep_config)
    configs = [composed(job) for job in jobs]
    for cfg in configs:
        check_job(cfg)
    plan = fold_jobs(jobs, [what_it_trains(cfg) for cfg in configs])
    launched = [configs[position] for position in plan.kept]
    reject_shared_dirs([job_subdir(cfg.copy(), num) for num, cfg in enumerate(launched)], raw_subdir)
    check_each(check_launched, launched, [f"job {num} of {len(launched)}: {shown}"
                                          for num, shown in enumerate(shown_jobs(plan.jobs))])
    return plan, launched


def sweep_job_configs(overrides: Sequence[str], config_name: str, check_job: Callable[[DictConfig], None],
                      check_launched: Callable[[DictConfig], None] | None = None,
                      sweep_config: DictConfig | None = None) -> list[DictConfig]:
    """The composed config (Hydra's settings included) of every job the sweep launches, each passed to
    ``check_job``, once no two jobs share a dir (nor, with Hydra's basic sweeper, train the same run); raises
    ConfigError otherwise. Every job the sweep launches is then passed to ``check_launched`` too, whose error
    names the job: a sweep runs only if all of it can. A sweeper that chooses its jobs as it goes (Optuna) gets
    each choice of its search space and each bound of a range once (:func:`sweep_variants` over its ``params`` and
    the command line), each a trial it could ask for, and its job dirs are checked by job number.
    ``sweep_config``: the sweep's own config where Hydra composed it already (its sweeper, params and subdir are
    read there instead of composing the first job for them)."""
    def composed(job: Sequence[str]) -> DictConfig:
        return compose(config_name, overrides=list(job), return_hydra_config=True)

    check_launched = check_launched or (lambda cfg: None)
    typed = sweep_variants(overrides)
    base = sweep_config if sweep_config is not None else composed(typed[0])
    raw_subdir = subdir_as_typed(base)
    sweeper = sweeper_of(base)
    arguments = sweep_arguments(base, overrides)
    if sweeper not in (PRODUCT_SWEEPER, BASIC_SWEEPER):
        variants = sweep_variants(arguments)
        reuse = sweep_config is None and variants[0] == typed[0]  # the sweep's own config is no job's
        configs = [base if reuse and n == 0 else composed(v) for n, v in enumerate(variants)]
        for cfg in configs:
            check_job(cfg)
        check_each(check_launched, configs, [f"a trial the search may ask for ({shown})" for shown in shown_jobs(variants)])
        trials = int(OmegaConf.select(base, "hydra.sweeper.n_trials", default=2) or 2)
        reject_shared_dirs([job_subdir(base.copy(), num) for num in range(max(trials, 2))], raw_subdir)
        return configs
    jobs = planned_jobs(arguments)
    if sweeper == PRODUCT_SWEEPER:
        return checked_product(jobs, composed, check_job, check_launched, base)[1]
    configs = [composed(job) for job in jobs]
    for cfg in configs:
        check_job(cfg)
    reject_shared_dirs([job_subdir(cfg.copy(), num) for num, cfg in enumerate(configs)], raw_subdir)
    reject_duplicates(jobs, [what_it_trains(cfg) for cfg in configs], arguments)
    check_each(check_launched, configs, [f"job {num} of {len(configs)}: {shown}"
                                         for num, shown in enumerate(shown_jobs(jobs))])
    return configs
