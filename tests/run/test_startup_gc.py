"""The garbage collector is paused while a run starts and resumes, with the start-up's objects frozen, when
training begins (attention_lab.startup_gc)."""

from __future__ import annotations

import gc

import pytest

from attention_lab import startup_gc


@pytest.fixture
def collector_restored():
    yield
    gc.unfreeze()
    gc.enable()


def test_resume_freezes_what_start_up_made_and_collects_again(collector_restored):
    startup_gc.pause()
    assert not gc.isenabled()
    made_at_start_up = [[] for _ in range(1000)]
    startup_gc.resume()
    assert gc.isenabled()
    assert gc.get_freeze_count() >= len(made_at_start_up)


def test_resume_leaves_a_running_collector_alone(collector_restored):
    frozen = gc.get_freeze_count()
    startup_gc.resume()  # a second job in one process: nothing was paused
    assert gc.isenabled() and gc.get_freeze_count() == frozen
