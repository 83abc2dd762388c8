"""TensorBoard's HParams tab: every run shows every knob, a sweep job also the settings its sweep varies beyond them
(from the command line or a preset's sweeper params), as they took effect, and each run its name (its overrides).
TensorBoard takes the table's columns from the first run it reads: over a logdir of single runs and sweeps, every
run's columns hold every knob."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata as hparams_metadata

from attention_lab.records.files import tensorboard_dir
from conftest import run_train

# The HParams table is written when a run starts: a few steps, no images and no ablations (not looked at).
TINY = ["max_steps=3", "task.train_size=256", "task.val_size=64", "trainer.val_check_interval=3",
        "callbacks.attention_maps.images=false", "~callbacks.head_score_maps", "ablation=[]"]


def logged_hparams(run_dir: Path) -> dict:
    events = EventAccumulator(str(tensorboard_dir(run_dir)), size_guidance={"tensors": 0}).Reload()
    content = events.PluginTagToContent(hparams_metadata.PLUGIN_NAME)
    start = hparams_metadata.parse_session_start_info_plugin_data(content[hparams_metadata.SESSION_START_INFO_TAG])
    experiment = hparams_metadata.parse_experiment_plugin_data(content[hparams_metadata.EXPERIMENT_TAG])
    assert {info.name for info in experiment.hparam_infos} == set(start.hparams)  # the columns
    return {key: value.string_value or value.number_value for key, value in start.hparams.items()}


KNOBS = {"model", "mixers", "heads", "kv_heads", "d_model", "layers", "mask", "window", "position", "block", "task", "lr",
         "batch_size", "dropout", "seed"}


def hparams_columns(logdir: Path, metrics: bool = False) -> list[str]:
    """The HParams table's columns as TensorBoard's hparams plugin computes them for ``logdir`` (its own backend,
    in-process: the experiment of the first run it reads, its hparams in the backend's order); with ``metrics``,
    its metric columns after them (the dashboard's layout)."""
    from tensorboard import context
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from tensorboard.plugins.hparams import backend_context

    multiplexer = plugin_event_multiplexer.EventMultiplexer()
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    provider = data_provider.MultiplexerDataProvider(multiplexer, str(logdir))
    backend = backend_context.Context(base_plugin.TBContext(data_provider=provider, logdir=str(logdir)))
    request = context.RequestContext()
    experiment = backend.experiment_from_metadata(request, "", metrics, backend.hparams_metadata(request, ""),
                                                  backend.hparams_from_data_provider(request, "", 0), 1000)
    return [info.name for info in experiment.hparam_infos] + [info.name.tag for info in experiment.metric_infos]


@pytest.fixture(scope="module")
def sweep(tmp_path_factory) -> Path:
    sweep = tmp_path_factory.mktemp("hparams") / "sweep"
    run_train(sweep, "model=self,multihead", "heads=2", "task.options.delay=0,1", "task=copy", *TINY, multirun=True)
    return sweep


def test_a_sweep_job_shows_every_knob_and_what_the_sweep_varies(sweep: Path):
    shown = [logged_hparams(sweep / str(job)) for job in range(4)]
    # model=self trains one head whatever heads=2 says: the column says what took effect.
    assert [(s["model"], s["heads"], s["task"], s["task.options.delay"]) for s in shown] == [
        ("self", 1, "copy", 0), ("self", 1, "copy", 1), ("multihead", 2, "copy", 0), ("multihead", 2, "copy", 1)]
    assert all(set(s) == KNOBS | {"run", "task.options.delay"} for s in shown)
    assert [s["run"].split(",max_steps=")[0] for s in shown] == [  # its overrides, as its TensorBoard run is named
        "model=self,heads=2,task.options.delay=0,task=copy", "model=self,heads=2,task.options.delay=1,task=copy",
        "model=multihead,heads=2,task.options.delay=0,task=copy",
        "model=multihead,heads=2,task.options.delay=1,task=copy"]


def test_a_single_run_shows_every_knob(tiny_trained_run: Path):
    shown = logged_hparams(tiny_trained_run)
    assert set(shown) == KNOBS | {"run"}
    assert hparams_columns(tiny_trained_run)[:2] == ["run", "seed"]  # what tells single runs apart, first


def test_over_runs_and_sweeps_the_table_has_every_knob(sweep: Path, tiny_trained_run: Path, tmp_path: Path):
    """An outputs/ of a sweep and a single run, laid out as train.py lays it out: the sweep's jobs come first."""
    outputs = tmp_path / "outputs"
    shutil.copytree(sweep, outputs / "multirun" / "2026-11-24" / "10-00-00", ignore=shutil.ignore_patterns("*.ckpt"))
    shutil.copytree(tiny_trained_run, outputs / "runs" / "2026-11-24" / "11-00-00",
                    ignore=shutil.ignore_patterns("*.ckpt"))
    assert set(hparams_columns(outputs)) >= KNOBS | {"run"}


def test_the_table_opens_on_what_tells_runs_apart_then_the_outcomes(sweep: Path):
    """TensorBoard's dashboard ticks the first five hparams and the first five metrics of the experiment its backend
    returns (hparams sorted by ``differs``, then by name; the dashboard asks with a limit of 1000): the sweep's
    varied settings, seed and run come first, then every knob its jobs share; the outcomes lead the metrics."""
    columns = hparams_columns(sweep / "0", metrics=True)
    hparams, metrics = [c for c in columns if not c.startswith("hp/")], [c for c in columns if c.startswith("hp/")]
    assert columns == hparams + metrics
    assert hparams[:4] == ["model", "run", "seed", "task.options.delay"]
    assert hparams[4:] == sorted(KNOBS - {"model", "seed"})
    # 3 steps solve nothing: steps_to_solve has no value, and its column is there all the same
    assert metrics == ["hp/steps_to_solve", "hp/val_seq_acc", "hp/val_loss", "hp/val_token_acc"]
