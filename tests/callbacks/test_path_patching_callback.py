"""Path patching as a measurement of the run (callbacks/path_patching.py): at the final validation only, every sender
head into every later head's q/k/v and the logits, the values the library gives on the same corrupted batches; into
metrics.json, the attention tab's end values and one heatmap (callbacks/head_score_maps.py), never the console's
table or the HParams columns; one info line where the model cannot be measured."""

from __future__ import annotations

import io
import json
import logging
import math
from types import SimpleNamespace

import lightning as L
import numpy as np
import pytest
import torch
from hydra.utils import instantiate
from lightning.pytorch.loggers import TensorBoardLogger
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from attention_lab.analysis.patching import corrupt_batch
from attention_lab.analysis.path_patching import path_patch, unsupported
from attention_lab.callbacks.head_score_maps import HeadScoreMaps, image_tag
from attention_lab.callbacks.path_patching import PathPatching
from attention_lab.data.tasks import build_task
from attention_lab.plotting.path_maps import path_grid_image
from attention_lab.records.hparams_table import outcomes
from conftest import compose_config, run_train

INDUCTION = ["task=induction", "mask=causal", "task.train_size=256", "task.val_size=32"]
PATH_IMAGE = image_tag("path_patching/logit_diff")


def expected_tags(layers: int, heads: int) -> set[str]:
    """Every path of a model of ``layers`` x ``heads``, written out here (not by the code under test)."""
    tags = set()
    for a in range(layers):
        for i in range(heads):
            tags.add(f"path_patching/logit_diff/layer{a}/head{i}/logits")
            tags |= {f"path_patching/logit_diff/layer{a}/head{i}/layer{b}/head{j}/{kind}"
                     for b in range(a + 1, layers) for j in range(heads) for kind in "qkv"}
    return tags


def fitted(overrides: list[str], callback: PathPatching) -> tuple[L.Trainer, L.LightningModule, L.LightningDataModule]:
    """4 training steps with a validation after 2, the callback attached (nothing logged, no checkpoint)."""
    cfg = compose_config(overrides)
    torch.manual_seed(0)
    datamodule = instantiate(cfg.data)
    module = instantiate(cfg.module, vocab=datamodule.vocab.itos)
    trainer = L.Trainer(max_steps=4, val_check_interval=2, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                        num_sanity_val_steps=0, callbacks=[callback])
    trainer.fit(module, datamodule=datamodule)
    return trainer, module, datamodule


def test_every_path_is_measured_at_the_final_validation_as_the_library_measures_it(one_torch_thread):
    callback = PathPatching(compose_config(INDUCTION).task, enabled=True)
    trainer, module, datamodule = fitted(INDUCTION, callback)
    assert not any(name.startswith("path_patching/") for name in trainer.callback_metrics)  # none during training
    assert callback.findings() == {}
    trainer.validate(module, datamodule=datamodule, verbose=False)
    final = callback.findings()
    assert set(final) == expected_tags(2, 4)
    task = build_task("induction")
    batches = [corrupt_batch(task, batch) for batch in datamodule.val_dataloader()]
    direct = {}
    for layer in range(2):
        for head in range(4):
            direct.update(path_patch(module, batches, (layer, head)))
    assert not any(math.isnan(value) for value in final.values())
    assert final == pytest.approx(direct, rel=1e-5, abs=1e-6)


def test_a_model_path_patching_cannot_measure_logs_one_line_and_nothing_else(caplog, one_torch_thread):
    overrides = [*INDUCTION, "block.residual=false"]
    callback = PathPatching(compose_config(overrides).task, enabled=True)
    with caplog.at_level(logging.INFO, logger="attention_lab"):
        trainer, module, datamodule = fitted(overrides, callback)
        trainer.validate(module, datamodule=datamodule, verbose=False)
        trainer.validate(module, datamodule=datamodule, verbose=False)
    why = unsupported(module)
    assert why
    lines = [record.getMessage() for record in caplog.records if "path patching" in record.getMessage()]
    assert lines == [f"path patching: not measured, {why}"]
    assert callback.findings() == {}
    assert not any(name.startswith("path_patching/") for name in trainer.callback_metrics)


def test_a_layer_that_cannot_send_is_named_once_and_the_others_are_measured(caplog, one_torch_thread):
    """Layer 0 of ``simple`` attention has no heads of its own: layer 1's heads send (into the logits alone)."""
    overrides = [*INDUCTION, "mixers=[simple,multihead]"]
    callback = PathPatching(compose_config(overrides).task, enabled=True)
    with caplog.at_level(logging.INFO, logger="attention_lab"):
        trainer, module, datamodule = fitted(overrides, callback)
        trainer.validate(module, datamodule=datamodule, verbose=False)
        trainer.validate(module, datamodule=datamodule, verbose=False)
    assert set(callback.findings()) == {f"path_patching/logit_diff/layer1/head{i}/logits" for i in range(4)}
    [line] = [record.getMessage() for record in caplog.records if "path patching" in record.getMessage()]
    assert line.startswith("path patching: some senders not measured, layer 0 (simple)"), line


TINY_RUN = ["task=induction", "mask=causal", "max_steps=2", "task.train_size=64", "task.val_size=32",
            "callbacks.attention_maps.images=false", "ablation=[]", "patching=false", "attribution=false",
            "~callbacks.circuit_scores", "~callbacks.loss_by_index_map"]  # the other measurements off: seconds


def run_images_and_end_values(run_dir) -> tuple[list[str], set[str]]:
    [log_dir] = (run_dir / "tensorboard").iterdir()  # the run's, named by its overrides
    events = EventAccumulator(str(log_dir), size_guidance={"images": 0, "tensors": 0})
    events.Reload()
    return events.Tags()["images"], {tag for tag in events.Tags()["tensors"] if tag.startswith("path_patching/")}


def test_the_knob_writes_metrics_json_the_end_values_and_the_heatmap_and_not_the_tables(tmp_path, one_torch_thread):
    proc = run_train(tmp_path / "run", *TINY_RUN, "path_patching=true")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    written = {name for name in metrics if name.startswith("path_patching/")}
    assert written == expected_tags(2, 4)
    images, end_values = run_images_and_end_values(tmp_path / "run")
    assert end_values == written  # the attention tab's end values
    assert images.count(PATH_IMAGE) == 1
    # Hundreds of values in a larger model: not in the console's final table, nor in the HParams metric columns.
    assert "path_patching/" not in proc.stdout + proc.stderr
    assert not any(name.startswith("path_patching/") for name in outcomes(metrics, "val/seq_acc"))


def test_the_knob_off_writes_nothing(tmp_path, one_torch_thread):
    run_train(tmp_path / "run", *TINY_RUN, "path_patching=false")
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert not any(name.startswith("path_patching/") for name in metrics)
    images, end_values = run_images_and_end_values(tmp_path / "run")
    assert PATH_IMAGE not in images and end_values == set()


def test_the_heatmap_is_the_grid_of_the_tags_senders_down_receiver_inputs_across(tmp_path):
    """A 2-layer x 2-head model's paths, each a value of its own: the image the callback writes is the picture of the
    grid written out here by hand (senders down; L1H0 q/k/v, L1H1 q/k/v, logits across; blank where layer 1's
    heads have no later head), pixel for pixel."""
    values = {f"path_patching/logit_diff/layer{a}/head{i}/logits": 0.1 * (2 * a + i) for a in range(2) for i in range(2)}
    values |= {f"path_patching/logit_diff/layer0/head{i}/layer1/head{j}/{kind}": 0.05 * (6 * i + 3 * j + n)
               for i in range(2) for j in range(2) for n, kind in enumerate("qkv")}
    logger = TensorBoardLogger(save_dir=str(tmp_path), name="", version="")
    trainer = SimpleNamespace(loggers=[logger], global_step=9, sanity_checking=False,
                              state=SimpleNamespace(fn="validate"),
                              callback_metrics={name: torch.tensor(v) for name, v in values.items()})
    HeadScoreMaps().on_validation_end(trainer, None)
    logger.experiment.flush()
    events = EventAccumulator(logger.log_dir, size_guidance={"images": 0})
    events.Reload()
    [image] = events.Images(PATH_IMAGE)
    drawn = np.asarray(Image.open(io.BytesIO(image.encoded_image_string)).convert("RGB"))
    nan = math.nan
    grid = [[0.00, 0.05, 0.10, 0.15, 0.20, 0.25, 0.0],
            [0.30, 0.35, 0.40, 0.45, 0.50, 0.55, 0.1],
            [nan, nan, nan, nan, nan, nan, 0.2],
            [nan, nan, nan, nan, nan, nan, 0.3]]
    senders = ["L0H0", "L0H1", "L1H0", "L1H1"]
    inputs = ["L1H0 q", "L1H0 k", "L1H0 v", "L1H1 q", "L1H1 k", "L1H1 v", "logits"]
    expected = path_grid_image(grid, senders, inputs, "defaults\npath patching · step 9")
    assert image.step == 9 and np.array_equal(drawn, expected)
    # and not the picture of another arrangement of the same numbers
    assert not np.array_equal(drawn, path_grid_image(np.asarray(grid)[[1, 0, 2, 3]], senders, inputs,
                                                     "defaults\npath patching · step 9"))
