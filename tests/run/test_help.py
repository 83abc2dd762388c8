"""`python scripts/train.py --help`: generated (attention_lab.run.config_help) from the schema and the config search path.
Each group a user chooses with its options (the variants and tasks: their registries'), every top-level knob of the
schema at its default with the meaning its field declares; nothing internal. The whole text comes from one process
(what a user runs); the rest is checked in-process on the same function."""

from __future__ import annotations

import dataclasses
import re
import shutil
import typing
from enum import Enum
from pathlib import Path

import pytest
from hydra import compose
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf

from attention_lab.attention.declared import declared_variants
from attention_lab.config import SCHEMA_SUFFIX, ModelConfig, TrainConfig, knob_names, typed
from attention_lab.data.tasks import TASK_REGISTRY
from attention_lab.run import cli, config_help
from attention_lab.run.config_help import GROUPS, help_sections, search_path_options, user_groups
from attention_lab.run.overrides import hydra_compose_api
from conftest import CONFIG_DIR, TRAIN, compose_config, run_script

MAX_LINES = 60  # one screen and a little: the whole config is `--cfg job`
FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}


@pytest.fixture(scope="module")
def help_text() -> str:
    proc = run_script(TRAIN, "--help", check=True)
    return proc.stdout


def sections_of(overrides: list[str] | None = None, config_dir: Path = CONFIG_DIR) -> str:
    """The generated part of --help, for a composition of ``config_dir`` with ``overrides`` (in-process)."""
    with hydra_compose_api(config_dir):
        return help_sections(compose("train", overrides=overrides or [], return_hydra_config=True))


def yaml_spelling(value) -> str:
    """A value as YAML writes it, an independent reference for the help's `knob=value` (null, false, padding)."""
    return OmegaConf.to_yaml(OmegaConf.create({"v": value})).split(":", 1)[1].strip()


def entries(text: str, heading: str) -> dict[str, str]:
    """The entries of one section (`== Groups` or `== Knobs`): name -> its text, continuation lines joined."""
    section = text[text.index(f"== {heading}"):]
    section = section[section.index("\n") + 1:].split("\n\n")[0]
    found: dict[str, str] = {}
    for entry in re.split(r"\n(?=  \S)", section):
        name, _, rest = entry.strip().partition(" ")
        assert name not in found, f"{name} is listed twice"
        found[name] = " ".join(rest.split())
    return found


def test_every_knob_of_the_schema_is_listed_at_its_default_with_its_meaning(help_text: str):
    knobs = entries(help_text, "Knobs")
    assert {"heads", "d_model", "mask", "max_steps", "probe", "resume", "tags"} <= set(knob_names())
    assert list(knobs) == [f"{name}={yaml_spelling(compose_config()[name])}" for name in knob_names()]
    for listed, name in zip(knobs, knob_names(), strict=True):
        assert knobs[listed] == " ".join(FIELDS[name].metadata["help"].split()), name
        assert len(knobs[listed].split()) >= 3, f"{name}: no meaning given"


def test_every_top_level_setting_that_is_not_a_group_is_a_knob_with_a_meaning():
    """A field added to TrainConfig without knob(help=...) would be missing from --help and the docs."""
    cfg = compose_config()
    plain = [key for key in cfg if not isinstance(cfg[key], DictConfig)]
    assert plain == knob_names()


def test_train_yaml_restates_no_default_of_the_schema():
    """The defaults are the schema's alone: train.yaml sets no knob, and the composed config holds the schema's."""
    entry = OmegaConf.load(CONFIG_DIR / "train.yaml")
    assert not set(entry) & set(knob_names()), set(entry) & set(knob_names())
    cfg, schema = compose_config(), OmegaConf.structured(TrainConfig)
    for name in knob_names():
        assert cfg[name] == schema[name], name


def test_the_model_defaults_are_the_knobs_defaults():
    """ModelConfig in Python and the model that configs/ compose from the knobs' defaults are one model."""
    composed = typed(ModelConfig, OmegaConf.to_container(compose_config().model, resolve=True))
    assert composed == ModelConfig(name="multihead")
    for name in knob_names():
        model_field = FIELDS[name].metadata.get("sets")
        if model_field:
            assert getattr(ModelConfig(name="x"), model_field) == FIELDS[name].default, name


def test_a_value_set_on_the_command_line_or_by_a_preset_is_shown():
    text = sections_of(["heads=3", "mask=causal", "experiment=mask_ablation"])
    knobs = entries(text, "Knobs")
    assert "heads=3" in knobs and "mask=causal" in knobs and "max_steps=800" in knobs  # the preset's
    assert "heads=4" not in knobs and "mask=padding" not in knobs


def group_options(group: str) -> list[str]:
    return sorted(path.stem for path in (CONFIG_DIR / group).glob("*.yaml"))


def listed_options(group: str, text: str) -> list[str]:
    """The option names of a group's entry: what follows its meaning (GROUPS) and ': '."""
    assert text.startswith(GROUPS[group] + ": "), (group, text)
    return re.findall(r"\w+", text[len(GROUPS[group]) + 2:])


def test_every_group_a_user_chooses_is_listed_with_its_options_the_chosen_one_first(help_text: str):
    groups = entries(help_text, "Groups")
    dirs = sorted(p.name for p in CONFIG_DIR.iterdir() if p.is_dir() and p.name != "hydra")
    assert set(groups) == {*dirs, "hydra/launcher"}
    defaults = compose_config(return_hydra_config=True).hydra.runtime.choices
    for group in dirs:
        listed = listed_options(group, groups[group])
        assert sorted(listed) == group_options(group), group
        if defaults.get(group):
            assert listed[0] == defaults[group], group
    launchers = listed_options("hydra/launcher", groups["hydra/launcher"])
    assert launchers[0] == defaults["hydra/launcher"] == "basic" and {"parallel", "slurm"} <= set(launchers)


def test_the_variants_and_tasks_listed_are_the_registries(help_text: str):
    """A variant or a task is a registered class plus a yaml: the help lists the yamls, which must be the classes."""
    groups = entries(help_text, "Groups")
    assert sorted(listed_options("model", groups["model"])) == sorted(declared_variants())
    assert sorted(listed_options("task", groups["task"])) == sorted(TASK_REGISTRY)


def test_the_options_are_those_hydras_config_loader_offers():
    """The help reads the config sources itself (Hydra's loader copies its whole ConfigStore per question): the
    options it finds are the loader's, for every group, launchers from plugins included."""
    with hydra_compose_api(CONFIG_DIR):
        cfg = compose("train", return_hydra_config=True)
        loader = GlobalHydra.instance().config_loader()
        for group in user_groups(cfg):
            offered = [o for o in loader.get_group_options(group) if not o.endswith(SCHEMA_SUFFIX)]
            assert search_path_options(cfg, group) == sorted(offered), group
    assert {"basic", "parallel", "slurm", "submitit_slurm"} <= set(offered)  # the last group: hydra/launcher


def test_an_option_added_to_a_copy_of_the_configs_is_listed(tmp_path: Path):
    """Nothing in the help is a list kept by hand: a new yaml in a group appears in it."""
    config_dir = tmp_path / "configs"
    shutil.copytree(CONFIG_DIR, config_dir)
    (config_dir / "block" / "thin.yaml").write_text("name: thin\nmlp: false\n")
    assert "thin" in listed_options("block", entries(sections_of(config_dir=config_dir), "Groups")["block"])


def test_a_composition_does_not_write_the_help(monkeypatch):
    """Hydra reads the help's template while it composes any config: the help is written only for --help."""
    written = []
    monkeypatch.setattr(config_help, "help_sections", lambda cfg: written.append(cfg) or "")
    cli.register_help()
    cfg = compose_config(return_hydra_config=True)
    assert written == []
    assert cfg.hydra.help.template is not None and len(written) == 1


def test_an_enum_knob_names_each_of_its_values():
    hints = typing.get_type_hints(TrainConfig)
    enums = [name for name in knob_names() if isinstance(hints[name], type) and issubclass(hints[name], Enum)]
    assert {"mask", "position", "device"} <= set(enums)
    for name in enums:
        for value in hints[name]:
            assert re.search(rf"\b{value.value}\b", FIELDS[name].metadata["help"]), (name, value.value)


def test_nothing_internal_and_short(help_text: str):
    assert "_schema" not in help_text and "${" not in help_text and "_target_" not in help_text
    assert "--cfg job" in help_text and "--hydra-help" in help_text
    assert len(help_text.splitlines()) <= MAX_LINES, len(help_text.splitlines())


def test_help_into_a_closed_pipe_ends_quietly():
    """`--help | head -1`: the reader is gone before the help is written; no traceback, exit status 1."""
    import subprocess
    import sys

    from conftest import ROOT, script_env

    proc = subprocess.Popen([sys.executable, str(TRAIN), "--help"], cwd=ROOT, env=script_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # before the child has imported Hydra, long before it prints
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in err and "BrokenPipe" not in err, err
