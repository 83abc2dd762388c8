"""What ``python scripts/train.py --help`` and docs/configuration.md's knob table say, generated: every knob's default
and meaning from the schema (:class:`attention_lab.config.TrainConfig`, declared with ``knob(...)``), every group's
options from the config search path, the variants from their classes' declarations and the tasks from their
registry. Nothing here lists a knob, a variant or a task.

``--help`` is Hydra's own, customised in its documented way: ``hydra.help.template`` (configs/hydra/help/lab.yaml)
interpolates ``${lab.help:}``, the resolver that :func:`register_help` registers (scripts/train.py calls it), which
calls :func:`help_sections` on the composed config. The docs' table is :func:`knob_table`;
``python -m attention_lab.config_help docs/configuration.md`` writes it there, and tests/test_config_help.py checks
that the docs hold it.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import textwrap
from collections.abc import Iterable
from enum import Enum
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

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
# Where a group's options come from where it is not the config dir alone: the classes that the options build.
REGISTERED_GROUPS = ("model", "task")


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


def schema_default(knob: dataclasses.Field) -> Any:
    return knob.default_factory() if knob.default is dataclasses.MISSING else knob.default


def aligned(name: str, text: str, column: int) -> list[str]:
    """``  name   text``, the text wrapped at WIDTH under its column; a name too long for it: the text below."""
    indent = " " * column
    head = f"  {name}"
    lines = textwrap.wrap(text, WIDTH, initial_indent=indent, subsequent_indent=indent, break_on_hyphens=False)
    if len(head) < column - 1 and lines:
        return [head + lines[0][len(head):], *lines[1:]]
    return [head, *lines]


def variant_kinds() -> dict[str, list[str]]:
    """Variant names by kind (each class's ``kind``), softmax first."""
    from attention_lab.attention.declared import declared_variants

    kinds: dict[str, list[str]] = {}
    for name, facts in sorted(declared_variants().items(), key=lambda item: (item[1].kind != "softmax", item[1].kind, item[0])):
        kinds.setdefault(facts.kind, []).append(name)
    return kinds


def task_names() -> list[str]:
    from attention_lab.data.tasks import TASK_REGISTRY

    return sorted(TASK_REGISTRY)


def group_options(group: str, loader: Any) -> list[str]:
    """A group's options as the config search path offers them (the schemas stored beside them left out)."""
    return sorted(option for option in loader.get_group_options(group) if not option.endswith(SCHEMA_SUFFIX))


def user_groups(loader: Any) -> list[str]:
    """The groups of the config search path a user chooses: the app's own, and Hydra's launchers."""
    found = [group for group in loader.list_groups("") if group != "hydra"] + ["hydra/launcher"]
    return [group for group in GROUPS if group in found] + sorted(set(found) - set(GROUPS))


def group_entry(group: str, chosen: str | None, loader: Any) -> list[str]:
    """One group: what it decides, the option chosen (the default unless set; none for a preset), the others."""
    if group == "model":
        others = "; ".join(f"{kind}: {', '.join(n for n in names if n != chosen)}"
                           for kind, names in variant_kinds().items() if set(names) - {chosen})
        others = f"the others, by kind: {others}"
    else:
        options = task_names() if group == "task" else group_options(group, loader)
        others = ", ".join(option for option in options if option != chosen)
    text = "; ".join(part for part in (chosen, others) if part)
    return aligned(group, f"{GROUPS.get(group, 'options')}: {text}", GROUP_COLUMN)


def help_sections(cfg: Any) -> str:
    """The groups and the knobs of ``--help``, for the composed config ``cfg`` (with ``hydra``): each group's option
    and each knob's value as composed (the defaults, unless the command line or a preset set them)."""
    from hydra.core.global_hydra import GlobalHydra

    loader = GlobalHydra.instance().config_loader()
    choices = cfg.hydra.runtime.choices
    lines = ["== Groups: group=option (the chosen one first: the default, unless set) =="]
    for group in user_groups(loader):
        lines += group_entry(group, choices.get(group), loader)
    lines += ["", "== Knobs: knob=value (as composed: the default, unless set) =="]
    for knob in knob_fields():
        lines += aligned(f"{knob.name}={as_typed(cfg[knob.name])}", knob.metadata["help"], KNOB_COLUMN)
    return "\n".join(lines).replace("$", "$$")  # Hydra fills the template with string.Template


def register_help() -> None:
    """``${lab.help:}``: the groups and knobs of ``--help`` (the resolver is handed the composed config)."""

    def resolve(*, _root_: DictConfig) -> str:
        return help_sections(_root_)

    OmegaConf.register_new_resolver("lab.help", resolve, replace=True)


def knob_table() -> str:
    """docs/configuration.md's table of the knobs: each knob's default and its whole meaning, from the schema."""
    rows = ["| knob | default | values and meaning |", "|---|---|---|"]
    for knob in knob_fields():
        meaning = knob.metadata["help"] + (f". {knob.metadata['more']}" if knob.metadata["more"] else "")
        cell = meaning.replace("|", r"\|")  # a table's cell
        rows.append(f"| `{knob.name}` | `{as_typed(schema_default(knob))}` | {cell} |")
    return "\n".join(rows)


def replace_knob_table(text: str) -> str:
    """``text`` (docs/configuration.md) with its knob table (the first table after the "## Knobs" heading)
    regenerated."""
    match = re.search(r"^## Knobs.*\n(?:[^|\n].*\n|\n)*?((?:\|.*\n)+)", text, re.MULTILINE)
    if match is None:
        raise ValueError("no table after a '## Knobs' heading")
    return text[:match.start(1)] + knob_table() + "\n" + text[match.end(1):]


def main(argv: list[str]) -> None:
    """``python -m attention_lab.config_help <docs/configuration.md>``: rewrites that file's knob table."""
    for name in argv:
        path = Path(name)
        path.write_text(replace_knob_table(path.read_text(encoding="utf-8")), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1:])
