"""Attribution patching as a measurement of the run (callbacks/attribution.py): its values at every validation, its
rank correlation with activation patching exactly where both were measured (whichever callback comes first), the
line where they disagree, and every layer of a recurrent mixer and of a hybrid stack."""

from __future__ import annotations

import logging
import math

import lightning as L
import pytest
import torch
from hydra.utils import instantiate
from lightning.pytorch.loggers import Logger, TensorBoardLogger
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from attention_lab.analysis.attribution import attribute_batches, rank_correlation
from attention_lab.analysis.patching import corrupt_batch, patched_layers
from attention_lab.analysis.tags import ATTRIBUTION, PATCHING, HeadMetric, tag
from attention_lab.callbacks.activation_patching import ActivationPatching
from attention_lab.callbacks.attribution import RANK_CORR, AttributionPatching, disagreement, first_examples
from attention_lab.callbacks.head_score_maps import HeadScoreMaps, image_tag
from attention_lab.data.tasks import build_task
from attention_lab.tensorboard_plugin.scores import parse_tag
from conftest import compose_config

HEADS = [(layer, head) for layer in range(2) for head in range(4)]  # the default model: 2 layers of 4 heads


class Recorder(Logger):
    """Every ``log_metrics`` call, in order, as (step, metrics)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[int | None, dict[str, float]]] = []

    @property
    def name(self) -> str:
        return "recorder"

    @property
    def version(self) -> int:
        return 0

    def log_hyperparams(self, params, *args, **kwargs) -> None:
        pass

    def log_metrics(self, metrics, step=None) -> None:
        self.calls.append((step, {key: float(value) for key, value in metrics.items()}))


def trained(overrides: list[str], callbacks: list[L.Callback], loggers: list[Logger], max_steps: int = 4):
    """A tiny induction run: ``max_steps`` steps validated every 2, then the final validation (as train.py's);
    the module and its datamodule."""
    cfg = compose_config(["task=induction", "mask=causal", "task.train_size=128", "task.val_size=24", *overrides])
    torch.manual_seed(0)
    datamodule = instantiate(cfg.data)
    module = instantiate(cfg.module, vocab=datamodule.vocab.itos)
    trainer = L.Trainer(max_steps=max_steps, val_check_interval=2, logger=loggers or False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                        num_sanity_val_steps=0, callbacks=callbacks)
    if max_steps:
        trainer.fit(module, datamodule=datamodule)
    trainer.validate(module, datamodule=datamodule, verbose=False)
    return module, datamodule


def head_values(metrics: dict[str, float], family: str) -> dict[str, float]:
    """``layer{l}/head{h}`` -> value, for rank_correlation across two families."""
    return {f"layer{layer}/head{head}": metrics[tag(family, layer, head)] for layer, head in HEADS}


@pytest.mark.parametrize(("every_validation", "attribution_first"), [(False, False), (True, True)],
                         ids=["patching_at_the_end", "patching_every_validation_callbacks_reversed"])
def test_attribution_at_every_validation_and_rank_corr_where_patching_was_measured(
        every_validation, attribution_first, tmp_path, caplog):
    patching = ActivationPatching({"name": "induction"}, every_validation=every_validation)
    attribution = AttributionPatching({"name": "induction"}, all_examples=every_validation)
    recorder = Recorder()
    order = [attribution, patching] if attribution_first else [patching, attribution]
    with caplog.at_level(logging.INFO, logger="attention_lab.callbacks.attribution"):
        module, datamodule = trained([], [*order, HeadScoreMaps()], [recorder, TensorBoardLogger(tmp_path, name="")])
    every_head = {tag(ATTRIBUTION, layer, head) for layer, head in HEADS}
    # two validations during fit, then the final one: every head each time
    logged = [(step, metrics) for step, metrics in recorder.calls if every_head & set(metrics)]
    assert len(logged) == 3 and all(every_head <= set(metrics) for _, metrics in logged)
    # the rank correlation exactly where the patching was measured too (during fit its values are curves only with
    # patching_every_validation), in the same call as the values it compares
    patched = [index for index, (_, metrics) in enumerate(logged) if tag(PATCHING, 0, 0) in metrics]
    assert patched == ([0, 1, 2] if every_validation else [])
    correlations = [index for index, (_, metrics) in enumerate(logged) if RANK_CORR in metrics]
    assert correlations == ([0, 1, 2] if every_validation else [2])
    assert sum(RANK_CORR in metrics for _, metrics in recorder.calls) == len(correlations)
    for _, metrics in logged[:2] if every_validation else []:
        assert metrics[RANK_CORR] == pytest.approx(rank_correlation(head_values(metrics, ATTRIBUTION),
                                                                    head_values(metrics, PATCHING)), abs=1e-9)
    final = attribution.findings()
    exact = rank_correlation(head_values(final, ATTRIBUTION), head_values(patching.findings(), PATCHING))
    assert final[RANK_CORR] == logged[-1][1][RANK_CORR] == pytest.approx(exact, abs=1e-9)
    # the final values are those of the final model on the whole validation set, the patching's batches
    batches = [corrupt_batch(build_task("induction"), batch) for batch in datamodule.val_dataloader()]
    assert {k: v for k, v in final.items() if k != RANK_CORR} == pytest.approx(attribute_batches(module, batches),
                                                                               rel=1e-5, abs=1e-6)
    notes = [r.getMessage() for r in caplog.records if r.name == "attention_lab.callbacks.attribution"]
    assert notes == ([disagreement(final[RANK_CORR])] if not final[RANK_CORR] >= 0.5 else [])
    # drawn as the patching is: a layers x heads heatmap, and a grid of the attention tab
    images = EventAccumulator(str(next(tmp_path.rglob("events.out.tfevents.*")).parent)).Reload().Tags()["images"]
    assert image_tag(ATTRIBUTION) in images
    assert parse_tag(tag(ATTRIBUTION, 1, 2)) == HeadMetric(ATTRIBUTION, 1, 2)


def test_the_line_where_the_estimate_disagrees_with_patching():
    for value in (0.3, -0.8):
        line = disagreement(value)
        assert line is not None and "disagrees with patching" in line and "saturates" in line
    assert "no rank correlation" in disagreement(math.nan)
    assert disagreement(0.5) is None and disagreement(0.95) is None


def test_one_line_at_the_final_validation_where_there_is_nothing_to_rank(caplog):
    """One head: no rank correlation (NaN), said once, at the final validation."""
    patching, attribution = ActivationPatching({"name": "induction"}), AttributionPatching({"name": "induction"})
    with caplog.at_level(logging.INFO, logger="attention_lab.callbacks.attribution"):
        trained(["heads=1", "layers=1"], [patching, attribution], [])
    final = attribution.findings()
    assert set(final) == {tag(ATTRIBUTION, 0, 0), RANK_CORR} and math.isnan(final[RANK_CORR])
    notes = [r.getMessage() for r in caplog.records if r.name == "attention_lab.callbacks.attribution"]
    assert notes == [disagreement(math.nan)]


@pytest.mark.parametrize("overrides", [["model=gated_deltanet"], ["mixers=[gated_deltanet,multihead]", "layers=2"]],
                         ids=["gated_deltanet", "hybrid"])
def test_every_layer_of_a_recurrent_mixer_and_of_a_hybrid(overrides):
    patching, attribution = ActivationPatching({"name": "induction"}), AttributionPatching({"name": "induction"})
    module, _ = trained(overrides, [attribution, patching], [], max_steps=0)
    layers = patched_layers(module)
    assert layers == [0, 1]  # the recurrent layers have heads of their own: patched, and so attributed
    final = attribution.findings()
    assert set(final) == {tag(ATTRIBUTION, layer, head) for layer, head in HEADS} | {RANK_CORR}
    assert all(math.isfinite(value) for value in final.values())


def test_between_the_patching_a_few_examples_in_order():
    batches = [(torch.arange(40).view(40, 1), torch.arange(40).view(40, 1) + 100) for _ in range(2)]
    kept = first_examples(batches, 64)
    assert [len(inputs) for inputs, _ in kept] == [40, 24]
    assert torch.equal(kept[1][0].flatten(), torch.arange(24)) and torch.equal(kept[1][1].flatten(), torch.arange(24) + 100)
