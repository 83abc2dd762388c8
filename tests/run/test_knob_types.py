"""A top-level knob of the wrong type is refused from the command line alone, with the line Hydra's composition
would have led to (attention_lab.run.cli)."""

from __future__ import annotations

import pytest
from omegaconf.errors import ValidationError

from attention_lab.run.cli import check_knob_types
from attention_lab.run.describe import describe
from conftest import compose_config

WRONG_TYPES = ["heads=two", "d_model=wide", "mask=diagonal", "position=abc", "device=tpu", "heads=null", "lr=fast",
               "seed=1.5", "max_steps=[1]", "ablation_every_validation=maybe", "threads=x", "ablation=zero"]


@pytest.mark.parametrize("override", WRONG_TYPES)
def test_the_line_is_the_one_hydras_composition_leads_to(override):
    with pytest.raises(ValidationError) as early:
        check_knob_types([override])
    with pytest.raises(Exception) as composed:  # Hydra wraps OmegaConf's error in its own
        compose_config([override])
    assert describe(early.value, [override]) == describe(composed.value, [override])
    assert describe(early.value, [override]).startswith(f"{override} is invalid: ")


@pytest.mark.parametrize("argv", [["heads=two", "heads=3"], ["heads=3", "heads=two"]])
def test_every_value_typed_is_checked_as_hydra_applies_them_in_turn(argv):
    with pytest.raises(ValidationError):
        check_knob_types(argv)
    with pytest.raises(Exception):  # noqa: B017 - Hydra's own exception type, as Hydra chooses it
        compose_config(argv)


@pytest.mark.parametrize("argv", [
    ["model=self", "logger=csv", "task=copy"],        # groups: Hydra finds unknown options
    ["-m", "heads=two,3"],                            # a sweep: each value is checked as its job is composed
    ["+heads=two"], ["~heads"], ["model.num_heads=two"],  # adds, deletes and nested keys: left to Hydra
    ["heads=${d_model}"], ["probe=3"], ["tags=[a,b]"], ["max_epochs=null"],
])
def test_what_the_command_line_alone_cannot_decide_is_left_to_hydra(argv):
    check_knob_types(argv)


def test_a_list_knob_says_it_takes_a_list():
    with pytest.raises(ValidationError) as err:
        check_knob_types(["ablation=zero"])
    assert describe(err.value, ["ablation=zero"]) == "ablation=zero is invalid: expected a list, e.g. [a,b], got 'zero'"
