"""When the probe's attention is logged (callbacks/probe_logging.py): densely while things change, so that the
attention tab's slider shows the default run before it is solved and the induction heads before they form."""

from __future__ import annotations

from attention_lab.callbacks.probe_logging import interval_at, is_doubling, is_logged, logged_steps
from conftest import compose_config

# Measured once on real runs (CPU, the configs as they are):
#   python scripts/train.py                                          -> steps_to_solve 120 (seed 0)
#   python scripts/train.py -m experiment=induction_formation layers=2  -> formation_step of seeds 0..4 below
DEFAULT_STEPS_TO_SOLVE = 120
FORMATION_STEPS = (190, 150, 140, 130, 120)
BEFORE = 5  # logged steps the slider needs before the event to show it happening


def steps_before(event: int, max_steps: int, every_n_steps: int) -> list[int]:
    return [step for step in logged_steps(max_steps, every_n_steps) if step < event]


def test_the_default_run_logs_its_probe_before_it_is_solved():
    cfg = compose_config()
    before = steps_before(DEFAULT_STEPS_TO_SOLVE, cfg.max_steps, cfg.log_attention_every_n_steps)
    assert len(before) >= BEFORE, before


def test_the_formation_preset_logs_its_probe_before_the_heads_form():
    cfg = compose_config(["experiment=induction_formation"])
    before = steps_before(min(FORMATION_STEPS), cfg.max_steps, cfg.log_attention_every_n_steps)
    assert len(before) >= BEFORE, before
    # ... at validation steps, where the formation history has its points
    assert all(step % cfg.trainer.val_check_interval == 0 for step in before), before


def test_dense_early_then_ten_records_per_doubling():
    assert logged_steps(200, 10) == list(range(10, 201, 10))
    assert [interval_at(step, 10) for step in (1, 199, 200, 399, 400, 800, 1600)] == [10, 10, 20, 20, 40, 80, 160]
    for start in (200, 400, 800, 1600):  # a long run writes few records
        assert len([s for s in logged_steps(4 * start, 10) if start <= s < 2 * start]) == 10
    assert not is_logged(0, 10)  # the start of training: nothing learned yet
    assert logged_steps(30, 50) == []  # an interval longer than the run: the end of training alone logs


def test_the_predictions_keep_one_record_per_doubling():
    assert [step for step in range(1, 2000) if is_doubling(step, 10)] == [100, 200, 400, 800, 1600]
    assert [step for step in range(1, 500) if is_doubling(step, 5)] == [50, 100, 200, 400]
    assert all(is_logged(step, 10) for step in range(1, 10_000) if is_doubling(step, 10))  # a subset of the probe's
