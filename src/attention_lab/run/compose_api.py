"""Hydra's Compose API around the project's configs, outside a running Hydra app: the checks of
``resume=<sweep dir>`` before the sweep is relaunched (:mod:`.sweep_resume`), and configs composed in-process.
(Inside the app, Hydra is initialised already: :mod:`.preflight` calls ``hydra.compose`` directly.)"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from hydra import initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from attention_lab.config import register_configs


@contextlib.contextmanager
def hydra_compose_api(config_dir: Path) -> Iterator[None]:
    register_configs()
    GlobalHydra.instance().clear()
    try:
        with initialize_config_dir(config_dir=str(config_dir), version_base="1.3"):
            yield
    finally:
        GlobalHydra.instance().clear()
