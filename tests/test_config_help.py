"""docs/configuration.md's knob table is the schema's: every knob once, at its default, with the meaning its field
declares; its groups table lists every group with every option (``make docs`` writes both: tests/test_docs_tables.py
checks that the docs hold what it writes; these read the docs independently of the generator)."""

from __future__ import annotations

import dataclasses
import re

from omegaconf import OmegaConf

from attention_lab.config import TrainConfig, knob_names
from conftest import ROOT, docs_table

DOCS = ROOT / "docs" / "configuration.md"
FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}


def docs_rows() -> dict[str, tuple[str, str]]:
    """The docs' knob table, read independently of the generator: knob -> (default, meaning)."""
    rows = {}
    for line in docs_table(DOCS, "knob"):
        knob, default, meaning = (cell.strip() for cell in re.split(r"(?<!\\)\|", line)[1:-1])
        rows[knob.strip("`")] = (default.strip("`"), meaning.replace("\\|", "|"))
    return rows


def test_the_docs_table_has_every_knob_at_its_default_with_its_meaning():
    rows, schema = docs_rows(), OmegaConf.structured(TrainConfig)
    assert list(rows) == knob_names()
    for name, (default, meaning) in rows.items():
        assert default == OmegaConf.to_yaml(OmegaConf.create({"v": schema[name]})).split(":", 1)[1].strip(), name
        declared = FIELDS[name].metadata
        assert meaning.startswith(declared["help"]) and meaning.endswith(declared["more"]), name


def docs_group_options() -> dict[str, list[str]]:
    """docs/configuration.md's Groups table: group -> the options it lists (backquoted, before any parenthesis)."""
    rows = {}
    for line in docs_table(DOCS, "group"):
        group, options = (cell.strip() for cell in line.split("|")[1:3])
        rows[group.strip("`")] = sorted(re.findall(r"`([^`]+)`", options.split(" (")[0]))
    return rows


def test_the_docs_groups_table_lists_every_group_with_every_option():
    from hydra import compose

    from attention_lab.run.config_help import search_path_options, user_groups
    from attention_lab.run.overrides import hydra_compose_api
    from conftest import CONFIG_DIR

    with hydra_compose_api(CONFIG_DIR):
        cfg = compose("train", return_hydra_config=True)
        offered = {group: search_path_options(cfg, group) for group in user_groups(cfg)}
    assert docs_group_options() == offered
