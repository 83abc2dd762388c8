"""The arguments of the loggers and callbacks a run will build, checked before its run dir exists.

Where a logger or a checkpoint callback writes is checked on the built objects (:mod:`attention_lab.records.writes`),
through what they report of their folders and files. That holds only for the arguments a class names itself: an
argument it takes into ``**kwargs`` is handed on, unseen, to something it builds later (Lightning's
TensorBoardLogger hands its own to torch's SummaryWriter, whose ``filename_suffix=/../../x`` writes an event file
anywhere, and whose ``log_dir`` clashes with the logger's), and an argument it does not take at all fails only when
the run is built, in its run dir. So every key of a ``logger`` or ``callbacks`` node with a ``_target_`` (and of
the nodes it builds in turn) must be an argument that the target's signature names, and positional arguments
(``_args_``) must fit the positions it names; anything else is refused in one line, whatever its value, for a
run, for each job of a sweep before the sweep starts, and for a record that a resume replays.

The targets are imported to read their signatures (Hydra's instantiate would import them a moment later): a run's
own checks import Lightning anyway; a sweep imports them only for jobs that set a logger or callback.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterator
from typing import Any

from omegaconf import DictConfig, OmegaConf

from attention_lab.errors import ConfigError
from attention_lab.names import did_you_mean

GROUPS = ("logger", "callbacks")  # the config's groups of built objects whose arguments are checked here
# Hydra's own keys of a node it instantiates: not arguments (``_args_``: the positional ones, checked apart).
HYDRA_KEYS = ("_target_", "_args_", "_recursive_", "_convert_", "_partial_")
NAMED = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def touches_built(keys: Iterator[str] | list[str]) -> bool:
    """Whether settings ``keys`` (overrides' keys, ``+``/``~`` removed) set or choose a logger or callback."""
    return any(key.split(".")[0].split("/")[0] in GROUPS for key in keys)


def located(target: str) -> Any:
    """What ``target`` (a ``_target_``: ``module.Name``, perhaps ``module.Class.method``) names, imported as
    Hydra's instantiate imports it: the longest prefix that imports as a module, then its attributes."""
    parts = target.split(".")
    found: Any = None
    rest = parts
    for cut in range(1, len(parts)):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            break
        rest = parts[cut:]
    if found is None:
        raise LookupError(target)
    for name in rest:
        found = getattr(found, name)
    return found


def nodes(cfg: DictConfig) -> Iterator[tuple[str, DictConfig]]:
    """(setting, node) of every node with a ``_target_`` under the checked groups, nested ones included (Hydra
    builds those too, unless the node says ``_recursive_: false``)."""
    def walk(setting: str, node: Any) -> Iterator[tuple[str, DictConfig]]:
        if not isinstance(node, DictConfig):
            return
        builds = "_target_" in node
        if builds:
            yield setting, node
            if "_recursive_" in node and node["_recursive_"] is False:
                return
        for key in node.keys():
            if not OmegaConf.is_interpolation(node, key):  # another setting's node: checked where it lives
                yield from walk(f"{setting}.{key}", node.get(key))

    for group in GROUPS:
        yield from walk(group, cfg.get(group))


def shown(node: DictConfig, key: str) -> str:
    """``key``'s value as the config holds it (interpolations unresolved), for an error line."""
    value = OmegaConf.to_container(node, resolve=False).get(key)
    return "null" if value is None else str(value)


def check_node(setting: str, node: DictConfig) -> None:
    """Raises ConfigError unless every argument ``node`` gives its target is one the target's signature names."""
    target = str(node["_target_"])
    try:
        built = located(target)
    except (ImportError, LookupError, AttributeError):
        raise ConfigError(f"{setting}._target_={target} is invalid: there is no such class or function to import") \
            from None
    try:
        signature = inspect.signature(built)
    except (TypeError, ValueError):  # a builtin without a readable signature
        raise ConfigError(f"{setting}._target_={target} is invalid: its arguments cannot be read, so the lab cannot "
                          "check where it writes") from None
    parameters = signature.parameters.values()
    named = [p.name for p in parameters if p.kind in NAMED]
    listed = ", ".join(named) or "none"
    hands_on = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    positional = [p.name for p in parameters if p.kind in POSITIONAL]
    given = node["_args_"] if "_args_" in node and not OmegaConf.is_interpolation(node, "_args_") else None
    count = len(given) if OmegaConf.is_list(given) else 0
    if count > len(positional):
        raise ConfigError(f"{setting}._args_ is invalid: {target} takes at most {len(positional)} positional arguments "
                          f"({', '.join(positional) or 'none'}), not {count}; name them instead")
    taken = set(positional[:count])
    for key in map(str, node.keys()):
        if key in HYDRA_KEYS:
            continue
        if key in taken:
            raise ConfigError(f"{setting}.{key} is invalid: {target} is given {key} twice, by position (_args_) and "
                              "by name")
        if key not in named:
            why = (" (it would hand it on, unchecked, to what it builds: the lab checks where a run writes only "
                   "through the arguments a class names)") if hands_on else ""
            raise ConfigError(f"{setting}.{key}={shown(node, key)} is invalid: it is not an argument of {target}{why}; "
                              f"its arguments are {listed}{did_you_mean(key, named, f'{setting}.')}")


def check_built_arguments(cfg: DictConfig) -> None:
    """Raises ConfigError for a logger or callback argument that the lab cannot check (see the module's doc)."""
    for setting, node in nodes(cfg):
        check_node(setting, node)
