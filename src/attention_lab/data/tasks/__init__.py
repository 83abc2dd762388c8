"""The sequence tasks, built from the corpus's words. A task is one module in this package whose class is
registered with :func:`register_task`, plus one yaml under ``configs/task/``: every module here is imported
below, so nothing else needs an edit. No torch import: the config checks use these."""

from __future__ import annotations

import importlib
import pkgutil

from attention_lab.data.tasks.base import TASK_REGISTRY, Pairs, Task, register_task
from attention_lab.errors import ConfigError

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")


def build_task(name: str) -> Task:
    if name not in TASK_REGISTRY:
        raise ConfigError(f"task={name} is unknown: choose one of {', '.join(sorted(TASK_REGISTRY))}")
    return TASK_REGISTRY[name]()


__all__ = ["TASK_REGISTRY", "Pairs", "Task", "build_task", "register_task"]
