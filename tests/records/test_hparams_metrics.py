"""TensorBoard's HParams metrics hold the run's optimized_metric (a preset's head score, say) and steps_to_solve
beside the final val/* metrics, and each run writes the Custom Scalars layout that opens on loss and accuracy."""

from __future__ import annotations

import re
from pathlib import Path

from tensorboard.backend.event_processing.event_accumulator import TENSORS, EventAccumulator
from tensorboard.plugins.custom_scalar import layout_pb2
from tensorboard.plugins.custom_scalar import metadata as layout_metadata
from tensorboard.plugins.hparams import metadata as hparams_metadata

from attention_lab.callbacks.scalars_layout import CATEGORY
from attention_lab.records.files import tensorboard_dir
from attention_lab.records.hparams_table import hparams_metrics
from attention_lab.tensorboard_logger import tensorboard_tag
from conftest import run_train

OPTIMIZED = "head_score/previous_token/layer1/head0"


def test_the_optimized_metric_and_steps_to_solve_are_hparams_metrics():
    metrics = {"val/loss": 0.5, "val/seq_acc": 1.0, OPTIMIZED: 0.75, "steps_to_solve": 250, "global_step": 300,
               "hparams": {"heads": 4}}
    assert hparams_metrics(metrics, OPTIMIZED) == {
        "hp/val_loss": 0.5, "hp/val_seq_acc": 1.0, "hp/head_score_previous_token_layer1_head0": 0.75,
        "hp/steps_to_solve": 250}
    # val/seq_acc as the optimized metric is listed once; a run that never solved has no steps_to_solve value
    assert hparams_metrics({**metrics, "steps_to_solve": None}, "val/seq_acc") == {
        "hp/val_loss": 0.5, "hp/val_seq_acc": 1.0}


def test_a_run_writes_its_metrics_and_the_layout(tmp_path: Path):
    run_dir = tmp_path / "run"
    run_train(run_dir, "max_steps=6", "task.train_size=256", "task.val_size=64", "trainer.val_check_interval=3",
              "trainer.log_every_n_steps=3", "callbacks.attention_maps.images=false", "ablation=[]",
              f"optimized_metric={OPTIMIZED}")
    events = EventAccumulator(str(tensorboard_dir(run_dir)), size_guidance={TENSORS: 0}).Reload()
    content = events.PluginTagToContent(hparams_metadata.PLUGIN_NAME)
    experiment = hparams_metadata.parse_experiment_plugin_data(content[hparams_metadata.EXPERIMENT_TAG])
    metric_tags = {info.name.tag for info in experiment.metric_infos}
    assert {"hp/val_seq_acc", "hp/head_score_previous_token_layer1_head0"} <= metric_tags, metric_tags

    (event,) = events.Tensors(layout_metadata.CONFIG_SUMMARY_TAG)
    layout = layout_pb2.Layout.FromString(event.tensor_proto.string_val[0])
    (category,) = [c for c in layout.category if c.title == CATEGORY]
    charts = {chart.title: list(chart.multiline.tag) for chart in category.chart}
    assert charts["loss"] == [f"^{re.escape(tensorboard_tag(f'{split}/loss'))}$" for split in ("train", "val", "ood")]
    assert set(charts) == {"loss", "sequence accuracy", "token accuracy"}
    logged = set(events.Tags()["scalars"])
    assert {tensorboard_tag("train/loss"), tensorboard_tag("val/loss")} <= logged  # the layout's tags are the run's
    assert all(re.fullmatch(charts["loss"][0], tag) is None for tag in logged - {tensorboard_tag("train/loss")})
