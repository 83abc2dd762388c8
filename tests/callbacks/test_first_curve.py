"""The default run's first curves tell the truth: every learning curve has at least 10 points by the step the run
is solved (TensorBoard's smoothing drew 3 validation points as a line ending far from the last value), and the run
has a readable name in every dashboard, also when TensorBoard is opened on its run dir alone."""

from __future__ import annotations

import json
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from attention_lab.records.files import tensorboard_dir
from attention_lab.records.run_names import NO_OVERRIDES, run_label
from attention_lab.tensorboard_logger import CURVES, tensorboard_tag
from conftest import compose_config

POINTS = 10  # before the run is solved, on every learning curve


def test_every_learning_curve_of_the_default_run_has_ten_points_by_its_solve(solved_run: Path):
    """solved_run is the default experiment (only its step bound and map schedule set): it stops where it is
    solved."""
    steps_to_solve = json.loads((solved_run / "metrics.json").read_text())["steps_to_solve"]
    assert steps_to_solve is not None
    events = EventAccumulator(str(tensorboard_dir(solved_run)), size_guidance={"scalars": 0}).Reload()
    for split in ("train", "val"):
        for curve in CURVES:
            points = {event.step for event in events.Scalars(tensorboard_tag(f"{split}/{curve}"))}
            before = sorted(step for step in points if step <= steps_to_solve)
            assert len(before) >= POINTS, (f"{split}/{curve}", steps_to_solve, before)


def test_a_run_without_overrides_writes_its_events_under_a_name(tmp_path: Path):
    """TensorBoard names a run by its events' folder under the logdir: opened on the run dir alone, a run whose
    events lay in tensorboard/ itself was listed as `tensorboard`."""
    from attention_lab.train import instantiate_all

    cfg = compose_config([f"paths.output_dir={tmp_path}"])
    (logger,) = instantiate_all(cfg, "logger", "").values()
    folder = Path(logger.log_dir).relative_to(tmp_path)
    assert folder == Path("tensorboard") / NO_OVERRIDES
    assert run_label(folder.as_posix()) == NO_OVERRIDES  # the attention tab's name for it, as before
    (logger,) = instantiate_all(cfg, "logger", "heads=3").values()  # a run with overrides: named by them
    assert Path(logger.log_dir).relative_to(tmp_path) == Path("tensorboard") / "heads=3"
