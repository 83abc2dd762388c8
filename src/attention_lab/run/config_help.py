"""What ``python scripts/train.py --help`` and docs/configuration.md's knob table say, generated: every knob's default
and meaning from the schema (:class:`attention_lab.config.TrainConfig`, declared with ``knob(...)``), every group's
options from the config search path, as ``group=option`` accepts them. Nothing here lists a knob, a variant or a
task: a variant or a task is one registered class plus one yaml, and tests/run/test_help.py checks that the options
listed are the registries' (reading the registries here would cost --help the parsing of every variant's source).

``--help`` is Hydra's own, customised in its documented way: ``hydra.help.template`` (configs/hydra/help/lab.yaml)
interpolates ``${lab.help:}``, the resolver that :func:`attention_lab.run.cli.register_help` registers
(scripts/train.py calls it), which calls :func:`help_sections` on the composed config. The docs' tables of the same
knobs and groups are :mod:`attention_lab.docs_tables`'s (``make docs``)."""

from __future__ import annotations

import dataclasses
import re
import textwrap
from collections.abc import Iterable
from enum import Enum
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore

from attention_lab.config import SCHEMA_SUFFIX, TrainConfig, knob_names

WIDTH = 118  # the help's lines, as the rest of Hydra's output: one terminal's width
KNOB_COLUMN = 36  # where a knob's meaning starts
GROUP_COLUMN = 18
# The groups a user chooses, in the order --help shows them, and what each one decides. A group of the config search
# path that is missing here is still listed, with its options, after these.
GROUPS = {
    "model": "the attention variant",
    "block": "what wraps each attention layer",
    "task": "what the model learns",
    "trainer": "Lightning Trainer arguments",
    "logger": "where metrics go (both: logger=[tensorboard,csv])",
    "callbacks": "checkpoints, early stopping, attention maps, ablations (drop one: ~callbacks.<name>)",
    "experiment": "a preset of knobs and sweep values",
    "hparams_search": "a search of the knobs (with -m)",
    "debug": "one batch each, to check that a config runs",
    "hydra/launcher": "where a sweep's jobs run",
}


def as_typed(value: Any) -> str:
    """A value as it is typed on the command line (YAML's spelling): null, false, padding, [zero,mean], 0.003."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Enum):
        return str(value.value)
    if isinstance(value, Iterable) and not isinstance(value, str):
        return "[" + ",".join(as_typed(item) for item in value) + "]"
    if isinstance(value, str) and (not value or re.search(r"[\s,]", value)):
        return f"'{value}'"
    return str(value)


def knob_fields() -> list[dataclasses.Field]:
    names = set(knob_names())
    return [f for f in dataclasses.fields(TrainConfig) if f.name in names]


def aligned(name: str, text: str, column: int) -> list[str]:
    """``  name   text``, the text wrapped at WIDTH under its column; a name too long for it: the text below."""
    indent = " " * column
    head = f"  {name}"
    lines = textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)
    if len(head) < column - 1 and lines:
        return [head + lines[0][len(head):], *lines[1:]]
    return [head, *lines]


def source_options(source: Any, group: str) -> set[str]:
    """The options of ``group`` in one source of the config search path (an entry of hydra.runtime.config_sources:
    a dir, a package or Hydra's ConfigStore), read where Hydra reads them; a group the source lacks: none."""
    if source.schema == "structured":
        try:
            return {name.removesuffix(".yaml") for name in ConfigStore.instance().list(group)}
        except OSError:  # ConfigStore's answer for a group it does not hold
            return set()
    import importlib.resources  # here: only --help reads packages

    root = Path(source.path) if source.schema == "file" else importlib.resources.files(source.path)
    folder = root.joinpath(group)
    if not folder.is_dir():
        return set()
    return {entry.name.removesuffix(".yaml") for entry in folder.iterdir() if entry.name.endswith(".yaml")}


def search_path_options(cfg: Any, group: str) -> list[str]:
    """A group's options over the config search path, as ``group=`` accepts them (the schemas left out). Read from
    the sources themselves: Hydra's config loader answers the same, after copying its whole ConfigStore per group
    (tests/run/test_help.py checks that the two agree)."""
    options = set().union(*(source_options(source, group) for source in cfg.hydra.runtime.config_sources))
    return sorted(option for option in options if not option.endswith(SCHEMA_SUFFIX))


def user_groups(cfg: Any) -> list[str]:
    """The groups a user chooses: those of the app's config dirs, and Hydra's launchers."""
    found = {entry.name for source in cfg.hydra.runtime.config_sources if source.schema == "file"
             for entry in Path(source.path).iterdir() if entry.is_dir() and entry.name != "hydra"}
    found.add("hydra/launcher")
    return [group for group in GROUPS if group in found] + sorted(found - set(GROUPS))


def group_entry(group: str, chosen: str | None, options: list[str]) -> list[str]:
    """One group: what it decides, the option chosen (the default unless set; none for a preset), the others."""
    others = ", ".join(option for option in options if option != chosen)
    text = "; ".join(part for part in (chosen, others) if part)
    return aligned(group, f"{GROUPS.get(group, 'options')}: {text}", GROUP_COLUMN)


def help_sections(cfg: Any) -> str:
    """The groups and the knobs of ``--help``, for the composed config ``cfg`` (with ``hydra``): each group's option
    and each knob's value as composed (the defaults, unless the command line or a preset set them)."""
    choices = cfg.hydra.runtime.choices
    lines = ["== Groups: group=option (the chosen one first: the default, unless set) =="]
    for group in user_groups(cfg):
        lines += group_entry(group, choices.get(group), search_path_options(cfg, group))
    lines += ["", "== Knobs: knob=value (as composed: the default, unless set) =="]
    for knob in knob_fields():
        lines += aligned(f"{knob.name}={as_typed(cfg[knob.name])}", knob.metadata["help"], KNOB_COLUMN)
    return "\n".join(lines).replace("$", "$$")  # Hydra fills the template with string.Template
