"""The parallel launcher's fork server is made ready once for every job it forks: Hydra's plugin registry built
there and kept by each job, the imports frozen out of the garbage collector's reach (attention_lab.run.fork_server,
and the launcher's ``with_plugins``)."""

from __future__ import annotations

import gc
import importlib

import pytest
from hydra.core.plugins import Plugins
from hydra.core.singleton import Singleton

from hydra_plugins.attention_lab_launcher.parallel_launcher import FORK_SERVER_SETUP, with_plugins


@pytest.fixture
def collector_restored():
    yield
    gc.unfreeze()


def test_the_setup_freezes_what_the_fork_server_imported(collector_restored):
    gc.unfreeze()
    imported = [[] for _ in range(1000)]  # what the preload modules left behind
    importlib.reload(importlib.import_module(FORK_SERVER_SETUP))
    assert gc.get_freeze_count() >= len(imported)


def test_a_job_keeps_the_plugin_registry_of_the_process_it_was_forked_from():
    registry = Plugins.instance()
    state = Singleton.get_state()  # what the launcher pickles for its jobs: without the registry
    try:
        Singleton.set_state(with_plugins(state))
        assert Plugins.instance() is registry  # no scan of hydra_plugins in the job
        Singleton.set_state(state)  # Hydra's own way: the registry scanned and built anew
        assert Plugins.instance() is not registry
    finally:
        Singleton.set_state({**state, "instances": {Plugins: registry, **state["instances"]}})
