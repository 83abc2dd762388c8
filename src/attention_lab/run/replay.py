"""What a run or sweep record may replay: its overrides are data, so they choose only what the project ships.

``resume=<run dir>`` replays ``.hydra/overrides.yaml`` and ``resume=<sweep dir>`` replays ``multirun.yaml``.
Hydra treats a config-group choice as a path (``experiment=../../../tmp/x/evil`` loads any yaml, whose
``hydra.callbacks`` Hydra then instantiates), so instead of a list of bad spellings, every choice of a group must
be one of that group's options as Hydra's config loader lists them: the project's config files and the
installed plugins' registered configs. Every value a record replays is a literal: an interpolation (``${...}``: a
reference, or a resolver such as ``oc.create``, ``oc.decode`` or ``oc.env``) would be resolved only when the run
instantiates its config, after every check here, into nodes that name code, paths or the environment. The config
a record composes may instantiate only the classes that the project's configs name, keeps the project's Hydra
callbacks, writes only where the project's configs write (its run dir), and reads a corpus only from its own dir
or the project's data.

Every function here runs with Hydra initialised (the Compose API or ``@hydra.main``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from hydra.core.global_hydra import GlobalHydra
from hydra.core.override_parser.overrides_parser import OverridesParser
from hydra.core.override_parser.types import ChoiceSweep, Glob, Override, QuotedString
from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from attention_lab.data.corpus import DEFAULT_CORPUS
from attention_lab.errors import ConfigError

# Arguments that say where an instantiated class writes (checkpoints, loggers, the trainer), and the config's own
# ``paths``: a record may not move them. A check on what was built (attention_lab.run.writes) backs this list up.
WRITE_LOCATIONS = ("dirpath", "filename", "save_dir", "name", "version", "sub_dir", "default_root_dir", "output_dir",
                   "log_dir", "_args_")
CORPUS = "task.corpus"  # the one setting that reads a file


def config_groups() -> set[str]:
    """Every config group Hydra knows here (``model``, ``hydra/launcher``, ...)."""
    loader = GlobalHydra.instance().config_loader()

    def walk(parent: str) -> Iterator[str]:
        for name in loader.list_groups(parent):
            group = f"{parent}/{name}" if parent else name
            yield group
            yield from walk(group)

    return set(walk(""))


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


def check_overrides(overrides: Sequence[str], setting: str, path: Path) -> list[Override]:
    """Raises ConfigError unless every override parses, sets only literal values, is placed where its group puts
    it, and chooses only options of its group. Returns the parsed overrides."""
    try:
        parsed = OverridesParser.create().parse_overrides(list(overrides))
    except Exception:  # noqa: BLE001 - OverrideParseException and friends
        raise ConfigError(f"{setting} is invalid: {path.name} holds an override that does not parse; a record is data "
                          "and is not replayed") from None
    loader, groups = GlobalHydra.instance().config_loader(), config_groups()
    for override in parsed:
        check_literal(override, setting, path)
        group = override.key_or_group
        if override.package is not None:
            raise ConfigError(f"{setting} is invalid: {path.name} places a config with '{override.input_line}', which "
                              "no run records; a record is data and is not replayed")
        if group not in groups:
            if "/" in group:  # a group Hydra would look up as a path
                raise ConfigError(f"{setting} is invalid: {path.name} chooses '{override.input_line}': a record is data "
                                  f"and may not name files ({group} is not one of the project's config groups)")
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
    """The ``_target_`` values of the project's own config files (read as data)."""
    found = set()
    for path in config_dir.rglob("*.yaml"):
        found.update(target for target, _ in targets(OmegaConf.load(path)))
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
    groups = config_groups()
    return [o.input_line for o in OverridesParser.create().parse_overrides(list(overrides)) if o.key_or_group in groups]


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
