"""The sequence tasks, built from the corpus's words. A task is one module in this package whose class is
registered with :func:`register_task`, plus one yaml under ``configs/task/``: the registry reads the names from
the sources and imports a task's module when its class is first used, so nothing else needs an edit and a run
imports the one task it builds. No torch import: the config checks use these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from attention_lab.data.tasks.base import TASK_REGISTRY, Pairs, Task, register_task
from attention_lab.errors import ConfigError


def build_task(name: str) -> Task:
    if name not in TASK_REGISTRY:
        raise ConfigError(f"task={name} is unknown: choose one of {', '.join(sorted(TASK_REGISTRY))}")
    return TASK_REGISTRY[name]()


def task_head_score_kind(task: Mapping[str, Any]) -> str | None:
    """The head-score kind of a run's ``task`` config (as saved with the run), or None: a task without one, or a
    record this lab did not write."""
    cls = TASK_REGISTRY.get(task.get("name")) if isinstance(task, Mapping) else None
    if cls is None:
        return None
    try:
        return cls().head_score_kind(task)
    except (AttributeError, KeyError, ConfigError):  # a saved config without the settings the task reads
        return None


__all__ = ["TASK_REGISTRY", "Pairs", "Task", "build_task", "register_task", "task_head_score_kind"]
