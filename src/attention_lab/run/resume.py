"""``resume=<run dir>``: continue a run in its own dir, with its own config; and what any record may replay.

A run dir is data, never code. Its ``.hydra/overrides.yaml`` is read as YAML, must be a list of plain overrides with
literal values that touch no ``hydra.*`` setting, and the config they compose may only instantiate the
``_target_`` classes that the project's own config files name. Overrides that would change the model or the task
are rejected. Nothing in the run dir changes until the resumed run has started.

What a record may replay (``resume=<run dir>`` replays ``.hydra/overrides.yaml``, ``resume=<sweep dir>``
``multirun.yaml``): its overrides are data, so they choose only what the project ships. Hydra treats a config-group
choice as a path (``experiment=../../../tmp/x/evil`` loads any yaml, whose ``hydra.callbacks`` Hydra then
instantiates), so instead of a list of bad spellings, every choice of a group must be one of that group's options as
Hydra's config loader lists them: the project's config files and the installed plugins' registered configs. Every
value a record replays is a literal: an interpolation (``${...}``: a reference, or a resolver such as
``oc.create``, ``oc.decode`` or ``oc.env``) would be resolved only when the run instantiates its config, after
every check here, into nodes that name code, paths or the environment. The config a record composes may
instantiate only the classes that the project's configs name, keeps the project's Hydra callbacks, writes only where
the project's configs write (its run dir), and reads a corpus only from its own dir or the project's data. These
functions run with Hydra initialised (the Compose API or ``@hydra.main``).

A run or sweep dir handed to a resume is written into only where it really is (:func:`check_contained`): a job dir
replaced by a symlink (to another sweep, to a user's folder) would receive checkpoints, TensorBoard files and
records, and another sweep's jobs would then count as this one's. So before anything is written, a resume refuses a
dir that holds a symlinked folder (a job dir, ``checkpoints/``) or a link to a file outside it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, Glob, Override, QuotedString
from omegaconf import DictConfig, OmegaConf, open_dict
from omegaconf.errors import OmegaConfBaseException

from attention_lab.data.corpus import DEFAULT_CORPUS
from attention_lab.errors import ConfigError
from attention_lab.records.files import (
    METRICS,
    SAFE_LOADER,
    SAVED_CONFIG,
    SAVED_OVERRIDES,
    UnreadableRecord,
    escaping_link,
    read_yaml_record,
    save_yaml,
)
from attention_lab.run.overrides import override_key
from attention_lab.run.replay_bounds import check_items, check_length

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
    for override in check_overrides(saved, setting, path):
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
    """The composed config of a resumed run is one the project's configs allow (:func:`check_config`) and
    keeps its model and task. A corpus the run's overrides name is read from its dir, unless this command
    names it itself."""
    check_config(resumed, baseline, allowed_targets(config_dir), plan.setting)
    if CORPUS not in {override_key(o) for o in plan.extra}:
        check_corpus(resumed, baseline, plan.run_dir, plan.setting)
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
    baseline = compose(config_name, overrides=group_choices(plan.overrides), return_hydra_config=True)
    check_resumed_config(plan, resumed, compose(config_name, overrides=plan.saved), baseline, config_dir)
    with open_dict(resumed):
        del resumed["hydra"]  # what the run sees: Hydra's own config is Hydra's
    return resumed


def record(plan: ResumePlan, resumed: DictConfig) -> None:
    """Once the resumed run has started: its overrides and config now include this command's."""
    save_yaml(OmegaConf.create(plan.overrides), plan.run_dir / SAVED_OVERRIDES)
    save_yaml(resumed, plan.run_dir / SAVED_CONFIG)


# Arguments that say where an instantiated class writes (checkpoints, loggers, the trainer), and the config's own
# ``paths``: a record may not move them. A check on what was built (attention_lab.records.writes) backs this list up.
WRITE_LOCATIONS = ("dirpath", "filename", "save_dir", "name", "version", "sub_dir", "default_root_dir", "output_dir",
                   "log_dir", "_args_")
CORPUS = "task.corpus"  # the one setting that reads a file


def config_groups(keys: Iterable[str]) -> set[str]:
    """Which of ``keys`` (what overrides set or choose: ``model``, ``hydra/launcher``, ``task.max_len``) are config
    groups Hydra knows here: each of a key's parents one, and its last name among the last parent's groups. Hydra
    lists the groups of each parent once; listing every group of the search path costs as much as a composition."""
    loader = GlobalHydra.instance().config_loader()
    children: dict[str, set[str]] = {}

    def known(group: str) -> bool:
        parent, slash, name = group.rpartition("/")
        if slash and not known(parent):
            return False
        if parent not in children:
            children[parent] = set(loader.list_groups(parent))
        return name in children[parent]

    return {key for key in keys if known(key)}


def chosen_options(override: Override) -> list[str]:
    """The options an override of a group chooses (a sweep's choices, a list's items); [] for a deletion or null."""
    value = override.value()
    if override.is_delete() or value is None or isinstance(value, Glob):  # a glob matches only existing options
        return []
    values = list(override.sweep_iterator()) if override.is_sweep_override() else [value]
    flat = [item for v in values for item in (v if isinstance(v, list) else [v])]
    return [str(item) for item in flat if item is not None]


def interpolated(value: Any) -> bool:
    """Whether a parsed override value (text, a number, a list, a dict) holds an interpolation anywhere."""
    if isinstance(value, QuotedString):  # a sweep's quoted choice, as Hydra's parser keeps it
        value = value.text
    if isinstance(value, dict):
        return any(interpolated(item) for item in [*value.keys(), *value.values()])
    if isinstance(value, list):
        return any(interpolated(item) for item in value)
    if not isinstance(value, str):
        return False
    try:
        return OmegaConf.is_interpolation(OmegaConf.create({"value": value}), "value")
    except OmegaConfBaseException:  # text that OmegaConf parses as an interpolation, and cannot
        return True


def replayed_values(override: Override) -> list[Any]:
    """The values an override sets: a sweep's choices; none for a range or an interval (numbers) or a glob (it
    matches only existing options)."""
    value = override.value()
    if isinstance(value, ChoiceSweep):
        return list(value.list)
    return [] if override.is_sweep_override() or isinstance(value, Glob) else [value]


def check_literal(override: Override, setting: str, path: Path) -> None:
    """Raises ConfigError for an override whose value is resolved when the run is built, not read."""
    if any(interpolated(value) for value in replayed_values(override)):
        raise ConfigError(f"{setting} is invalid: {path.name} sets {override.key_or_group} to an interpolation "
                          f"({override.input_line}); a record is data and replays only literal values (no ${{...}}: no "
                          "reference, resolver or environment value)")


VARIANT_LISTS = ("mixers", "model.mixers")  # lists whose items are looked up by name, as a group's options are


def check_variants(override: Override, setting: str, path: Path) -> None:
    """Raises ConfigError unless every item of a hybrid stack's list (``mixers=[...]``, a sweep of them) names a
    registered attention variant: the items choose code by name, as a config group's options do."""
    from attention_lab.attention.declared import declared_variants

    known = declared_variants()
    for value in replayed_values(override):
        for item in value if isinstance(value, list) else [] if value is None else [value]:
            item = item.text if isinstance(item, QuotedString) else item  # a sweep's quoted choice
            if not isinstance(item, str) or item not in known:
                raise ConfigError(f"{setting} is invalid: {path.name} sets {override.key_or_group} to a list holding "
                                  f"{item!r}: a record is data and names only attention variants there "
                                  f"({', '.join(sorted(known))})")


def check_overrides(overrides: Sequence[str], setting: str, path: Path) -> list[Override]:
    """Raises ConfigError unless every override parses, sets only literal values of a bounded size
    (:mod:`.replay_bounds`), is placed where its group puts it, and chooses only options of its group. Returns the
    parsed overrides."""
    check_length(overrides, setting, path)  # before the parser, whose time grows with the square of a length
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # noqa: BLE001 - OverrideParseException and friends
        raise ConfigError(f"{setting} is invalid: {path.name} holds an override that does not parse; a record is data "
                          "and is not replayed") from None
    loader, groups = GlobalHydra.instance().config_loader(), config_groups(o.key_or_group for o in parsed)
    for override in parsed:
        check_items(override, setting, path)
        check_literal(override, setting, path)
        group = override.key_or_group
        if override.package is not None:
            raise ConfigError(f"{setting} is invalid: {path.name} places a config with '{override.input_line}', which "
                              "no run records; a record is data and is not replayed")
        if group not in groups:
            if "/" in group:  # a group Hydra would look up as a path
                raise ConfigError(f"{setting} is invalid: {path.name} chooses '{override.input_line}': a record is data "
                                  f"and may not name files ({group} is not one of the project's config groups)")
            if isinstance(override.value(), Glob):  # matches a group's options; anywhere else Hydra fails on it
                raise ConfigError(f"{setting} is invalid: {path.name} sets '{override.input_line}': glob() chooses among "
                                  f"a config group's options, and {group} is not a config group")
            if group in VARIANT_LISTS:
                check_variants(override, setting, path)
            continue
        options = loader.get_group_options(group)
        for option in chosen_options(override):
            if option not in options:
                raise ConfigError(f"{setting} is invalid: {path.name} chooses {group}={option}: a record is data and "
                                  f"chooses only among the options of {group} ({', '.join(options)})")
    return parsed


def entries(node: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    """Every (where, key, value) in a config or a plain container, interpolations unresolved; ``where`` is the
    dotted path of the key's parent, ending in a dot."""
    if isinstance(node, DictConfig):
        node = OmegaConf.to_container(node, resolve=False)
    if isinstance(node, dict):
        for key, value in node.items():
            yield path, str(key), value
            yield from entries(value, f"{path}{key}.")
    elif isinstance(node, list):
        for index, item in enumerate(node):
            yield from entries(item, f"{path}{index}.")


def targets(node: Any) -> Iterator[tuple[str, str]]:
    """Every (``_target_`` value, where)."""
    return ((str(value), where) for where, key, value in entries(node) if key == "_target_")


def allowed_targets(config_dir: Path) -> set[str]:
    """The ``_target_`` values of the project's own config files, read as plain data."""
    found = set()
    for path in config_dir.rglob("*.yaml"):
        found.update(target for target, _ in targets(yaml.load(path.read_text(encoding="utf-8"), Loader=SAFE_LOADER)))
    return found


def write_locations(node: Any) -> Iterator[tuple[str, Any]]:
    """Every (key, unresolved value) of the config's ``paths`` and of a WRITE_LOCATIONS argument of a class it
    instantiates (a node with a ``_target_``), outside ``hydra``."""
    found = list(entries(node))
    instantiated = {where for where, key, _ in found if key == "_target_"}
    return ((where + key, value) for where, key, value in found if not where.startswith("hydra.") and
            (where + key == "paths" or (key in WRITE_LOCATIONS and where in instantiated)))


def group_choices(overrides: Sequence[str]) -> list[str]:
    """The overrides that choose a config group's options (checked by :func:`check_overrides`), without the
    settings: what the project's configs write, for these choices."""
    parsed = OverridesParser.create().parse_overrides(list(overrides))
    groups = config_groups(o.key_or_group for o in parsed)
    return [o.input_line for o in parsed if o.key_or_group in groups]


def check_config(replayed: DictConfig, baseline: DictConfig, allowed: set[str], setting: str) -> None:
    """The config a record composes instantiates only the project's classes, keeps the project's Hydra callbacks
    (when composed with its Hydra config) and writes where the project's configs write. ``baseline``: the same
    config composed from the record's :func:`group_choices` alone."""
    for target, where in targets(replayed):
        if not where.startswith("hydra.") and target not in allowed:
            raise ConfigError(f"{setting} is invalid: its overrides set {where}_target_={target}, which is not one of "
                              "the project's configs; a record is data and may not name code to run")
    if "hydra" in replayed and "hydra" in baseline:
        callbacks = OmegaConf.to_container(replayed.hydra.callbacks, resolve=False)
        if callbacks != OmegaConf.to_container(baseline.hydra.callbacks, resolve=False):
            raise ConfigError(f"{setting} is invalid: its overrides change hydra.callbacks; a record is data and may "
                              "not name code to run")
    expected = dict(write_locations(baseline))
    for where, value in write_locations(replayed):
        if where not in expected or expected[where] != value:
            raise ConfigError(f"{setting} is invalid: its overrides set {where}={value}; a run writes only into its "
                              "own dir, and a record may not move that")


def check_corpus(replayed: DictConfig, baseline: DictConfig, home: Path, setting: str) -> None:
    """A corpus that a record chose (not the project's configs) is read only from the record's own dir ``home`` or
    the project's data: a record reads no other file into the run (its words reach the logs)."""
    corpus = OmegaConf.select(replayed, CORPUS)
    if corpus is None or corpus == OmegaConf.select(baseline, CORPUS):
        return
    path = Path(str(corpus)).expanduser().resolve()  # the file read_sentences reads; links followed
    if not any(path.is_relative_to(root.resolve()) for root in (home, DEFAULT_CORPUS.parent)):
        raise ConfigError(f"{setting} is invalid: its overrides set {CORPUS}={corpus}, a file outside it; a record "
                          f"reads only its own dir or the project's data ({DEFAULT_CORPUS.parent}); to read that "
                          f"file, repeat the record's {CORPUS} override on your command line")


def check_contained(folder: Path, setting: str, only: str | None = None) -> None:
    """Raises ConfigError, before anything is written, when ``folder`` (or its entry ``only``) holds a link the lab
    would write through."""
    found = escaping_link(folder, only)
    if found is not None:
        path, what = found
        raise ConfigError(f"{setting} is invalid: its {path} is {what}; a resume writes only into the dir it was "
                          "given and does not follow it (replace the link with the folder itself, or remove it)")
