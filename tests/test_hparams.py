"""TensorBoard's HParams tab: a sweep's jobs show only the settings the sweep varies (from the command line or a
preset's sweeper params), as they took effect; a single run shows every knob."""

from __future__ import annotations

from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata as hparams_metadata

from attention_lab.run.files import tensorboard_dir
from conftest import run_train

TINY = ["max_steps=6", "task.train_size=256", "task.val_size=64", "trainer.val_check_interval=3",
        "~callbacks.attention_maps"]


def logged_hparams(run_dir: Path) -> dict:
    events = EventAccumulator(str(tensorboard_dir(run_dir)), size_guidance={"tensors": 0}).Reload()
    content = events.PluginTagToContent(hparams_metadata.PLUGIN_NAME)
    start = hparams_metadata.parse_session_start_info_plugin_data(content[hparams_metadata.SESSION_START_INFO_TAG])
    experiment = hparams_metadata.parse_experiment_plugin_data(content[hparams_metadata.EXPERIMENT_TAG])
    assert {info.name for info in experiment.hparam_infos} == set(start.hparams)  # the columns
    return {key: value.string_value or value.number_value for key, value in start.hparams.items()}


def test_a_sweep_job_shows_what_the_sweep_varies(tmp_path: Path):
    sweep = tmp_path / "sweep"
    run_train(sweep, "model=self,multihead", "heads=2", "task.delay=0,1", "task=copy", *TINY, multirun=True)
    shown = [logged_hparams(sweep / str(job)) for job in range(4)]
    # heads=2 and task=copy are the same in every job: not shown. model=self trains one head.
    assert shown == [{"model": "self", "task.delay": 0}, {"model": "self", "task.delay": 1},
                     {"model": "multihead", "task.delay": 0}, {"model": "multihead", "task.delay": 1}]


def test_a_single_run_shows_every_knob(tiny_trained_run: Path):
    shown = logged_hparams(tiny_trained_run)
    assert {"model", "heads", "kv_heads", "d_model", "layers", "mask", "window", "position", "block", "task", "lr",
            "batch_size", "dropout", "seed"} == set(shown)
