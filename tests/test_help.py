"""`python scripts/train.py --help` (configs/hydra/help/lab.yaml): the groups a user chooses with their options,
every top-level knob of the composed config at its default with a meaning, where the rest is; nothing internal."""

from __future__ import annotations

import re
from enum import Enum

import pytest
from omegaconf import DictConfig

from conftest import CONFIG_DIR, TRAIN, compose_config, run_script

MAX_LINES = 60  # one screen and a little: the whole config is `--cfg job`


@pytest.fixture(scope="module")
def help_text() -> str:
    proc = run_script(TRAIN, "--help", check=True)
    return proc.stdout


def as_typed(value) -> str:
    """A value the way it is typed on the command line (YAML's spelling)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, Enum):
        return value.name
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(as_typed(v) for v in value) + "]"
    if isinstance(value, str) and (not value or re.search(r"[\s,]", value)):
        return f"'{value}'"
    return str(value)


def top_level_knobs() -> dict[str, str]:
    cfg = compose_config()
    return {key: as_typed(cfg[key]) for key in cfg if not isinstance(cfg[key], DictConfig)}


def test_every_top_level_knob_is_listed_at_its_default_with_a_meaning(help_text: str):
    knobs = top_level_knobs()
    assert {"heads", "d_model", "mask", "max_steps", "probe", "resume"} <= set(knobs)
    lines = help_text.splitlines()
    for key, default in knobs.items():
        entry = f"  {key}={default}"
        matches = [n for n, line in enumerate(lines) if line.startswith(entry + " ") or line == entry]
        assert len(matches) == 1, f"{entry!r} is not listed once in --help"
        line = lines[matches[0]]
        meaning = line[len(entry):].strip() or lines[matches[0] + 1].strip()  # a long default: the next line
        assert len(meaning.split()) >= 3, f"{key}: no meaning given"


def test_a_default_changed_in_configs_fails_the_check(help_text: str):
    """The check above reads the defaults from the composed config: one that differs from the help is caught."""
    changed = compose_config(["heads=3", "mask=causal"])
    assert f"  heads={as_typed(changed.heads)} " not in help_text
    assert f"  mask={as_typed(changed.mask)} " not in help_text
    assert "  mask=padding " in help_text


def group_options(group: str) -> set[str]:
    return {path.stem for path in (CONFIG_DIR / group).glob("*.yaml")}


def test_every_group_a_user_chooses_is_listed_with_its_options(help_text: str):
    groups = [p.name for p in CONFIG_DIR.iterdir() if p.is_dir() and p.name != "hydra"] + ["hydra/launcher"]
    section = help_text[help_text.index("== Groups"):help_text.index("== Knobs")]
    entries = re.split(r"\n  (?=\S)", section)  # one entry per group, continuation lines included
    listed = {entry.split()[0]: set(re.findall(r"[\w]+", entry)) for entry in entries[1:]}
    assert set(groups) <= set(listed), set(groups) - set(listed)
    for group in groups:
        assert group_options(group) <= listed[group], (group, group_options(group) - listed[group])


def test_every_listed_launcher_exists(help_text: str):
    """The launchers come from the project and from installed plugins: each one listed is one Hydra accepts."""
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    entry = help_text[help_text.index("hydra/launcher"):help_text.index("== Knobs")]
    listed = set(re.findall(r"\w+", entry.split(":", 1)[1]))
    with initialize_config_dir(str(CONFIG_DIR), version_base="1.3"):
        known = set(GlobalHydra.instance().config_loader().get_group_options("hydra/launcher"))
    assert listed and listed <= known, listed - known


def test_nothing_internal_and_short(help_text: str):
    assert "_schema" not in help_text and "${" not in help_text and "_target_" not in help_text
    assert "--cfg job" in help_text and "--hydra-help" in help_text
    assert len(help_text.splitlines()) <= MAX_LINES, len(help_text.splitlines())
