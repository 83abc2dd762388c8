"""task.train_size=null: max_steps × batch_size training inputs (every step draws new ones), resolved once
(attention_lab.data.train_size) and read so by the datamodule, the tasks' checks and the memory bound."""

from __future__ import annotations

import pytest
from hydra.utils import instantiate

from attention_lab.checks import validate
from attention_lab.errors import ConfigError
from attention_lab.run.preflight import check_machine_and_data
from conftest import compose_config


def test_null_is_max_steps_times_batch_size_through_the_scripts_own_datamodule():
    cfg = compose_config(["experiment=mqar", "max_steps=7", "batch_size=8"])
    assert cfg.task.train_size is None  # the preset's own setting
    validate(cfg)
    datamodule = instantiate(cfg.data)
    datamodule.setup("fit")
    assert datamodule.task.train_size == 56 and len(datamodule.train_set) == 56
    assert len(datamodule.train_dataloader()) == 7  # one epoch: every step a new batch


def test_a_tasks_check_reads_the_resolved_number():
    """recall with one pair and one query makes 17 x 17 = 289 inputs: 5 x 64 = 320 training inputs are too many."""
    cfg = compose_config(["task=recall", "task.train_size=null", "task.options.pairs=1", "task.options.queries=1",
                          "task.val_size=10", "max_steps=5", "batch_size=64", "device=cpu"])
    with pytest.raises(ConfigError) as err:
        check_machine_and_data(cfg)
    assert str(err.value).startswith("task.train_size + task.val_size = 330 is invalid")


@pytest.mark.parametrize(("overrides", "line"), [
    (["task.train_size=0"], "task.train_size=0 is invalid: it must be a positive integer, or null"),
    (["task.train_size=-5"], "task.train_size=-5 is invalid: it must be a positive integer, or null"),
    (["task.train_size=null", "max_epochs=2"], "max_epochs=2 is invalid with task.train_size=null"),
])
def test_a_bad_train_size_is_one_line(overrides, line):
    with pytest.raises(ConfigError) as err:
        validate(compose_config(overrides))
    assert str(err.value).startswith(line) and "\n" not in str(err.value)
