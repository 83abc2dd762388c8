"""How many training inputs a run gets: ``task.train_size``, or, when it is null, one for every position of every
training batch, ``max_steps × batch_size``, so that each step draws inputs no earlier step saw (one epoch). The rule
is written here once; the datamodule, the memory check and the tasks' checks read the resolved number. No torch
import: the config checks use it."""

from __future__ import annotations

import dataclasses
from typing import Any

from attention_lab.config import TaskConfig
from attention_lab.errors import ConfigError

FRESH_INPUTS = "null: max_steps × batch_size, every training step draws new inputs"


def training_inputs(train_size: int | None, max_steps: int | None, batch_size: int) -> int:
    """``train_size``, or ``max_steps × batch_size`` when it is None (a run that names no max_steps cannot say)."""
    if train_size is not None:
        return train_size
    if max_steps is None or max_steps <= 0:
        raise ConfigError(f"task.train_size=null is invalid with max_steps={max_steps}: null means max_steps × "
                          "batch_size inputs, and that needs a positive max_steps; set task.train_size")
    return max_steps * batch_size


def with_training_inputs(task: TaskConfig, max_steps: int | None, batch_size: int) -> TaskConfig:
    """``task`` with its train_size resolved (:func:`training_inputs`): what every reader of the number sees."""
    return dataclasses.replace(task, train_size=training_inputs(task.train_size, max_steps, batch_size))


def check_train_size(train_size: Any, max_epochs: Any) -> None:
    """One line for a train_size that is neither a positive integer nor null, and for null beside a max_epochs: its
    one epoch is max_steps steps long, so max_epochs could never end the run before max_steps does."""
    if train_size is None:
        if max_epochs not in (None, -1):
            raise ConfigError(f"max_epochs={max_epochs} is invalid with task.train_size=null: the training set is "
                              "then max_steps × batch_size inputs, one epoch of max_steps steps, so max_epochs never "
                              "ends the run; set max_epochs=null or a task.train_size")
        return
    if isinstance(train_size, bool) or not isinstance(train_size, int) or train_size <= 0:
        raise ConfigError(f"task.train_size={train_size} is invalid: it must be a positive integer, or {FRESH_INPUTS}")
