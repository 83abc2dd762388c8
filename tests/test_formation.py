"""Induction heads forming: the in-context score, the formation record of a run, and the picture and the heads
table that compare.py draws from a sweep."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from PIL import Image

from attention_lab.callbacks.induction_formation import InductionFormation, loss_drop_step
from attention_lab.lit_module import in_context_gain
from conftest import ROOT, run_script, run_train

COMPARE = ROOT / "scripts" / "compare.py"


def test_in_context_gain_by_hand():
    # One induction input: the sequence 5 6 7 and its repeat; targets 6 and 7 at positions 3 and 4.
    targets = torch.tensor([[0, 0, 0, 6, 7, 0]])
    token_loss = torch.tensor([[0.0, 0.0, 0.0, 0.25, 0.5, 0.0]])
    total, count = in_context_gain(token_loss, targets)
    # Two words are left before target 6 (6 and 7), one before target 7: log 2 - 0.25 + log 1 - 0.5.
    assert count == 2
    assert float(total) == pytest.approx(math.log(2) - 0.25 - 0.5)


def fake_trainer(step: int, metrics: dict[str, float], fn: str = "fit"):
    return SimpleNamespace(sanity_checking=False, state=SimpleNamespace(fn=fn), global_step=step,
                           callback_metrics={k: torch.tensor(v) for k, v in metrics.items()})


def test_the_formation_step_is_the_first_validation_with_a_later_layer_induction_head():
    callback = InductionFormation(threshold=0.5)
    history = [(10, 2.0, 0.2, 0.9), (20, 1.9, 0.45, 0.9), (30, 1.0, 0.55, 0.9), (40, 0.9, 0.8, 0.9)]
    for step, loss, later, first in history:
        metrics = {"val/loss": loss, "head_score/induction/layer1/head0": later,
                   "head_score/induction/layer0/head0": first,  # layer 0 never counts: nothing below it
                   "head_score/previous_token/layer0/head1": 0.6}
        callback.on_validation_end(fake_trainer(step, metrics), None)
    callback.on_validation_end(fake_trainer(40, {"val/loss": 0.1}, fn="validate"), None)  # the final one: ignored
    record = callback.record()
    assert record["formation_step"] == 30 and record["loss_drop_step"] == 30
    assert record["formation"]["step"] == [10, 20, 30, 40]
    assert record["formation"]["induction_later_layers"] == pytest.approx([0.2, 0.45, 0.55, 0.8])
    assert record["formation"]["induction"] == pytest.approx([0.9] * 4)
    restored = InductionFormation()
    restored.load_state_dict(json.loads(json.dumps(callback.state_dict())))  # a resumed run keeps the history
    assert restored.record() == record


def test_a_one_layer_model_never_forms_by_definition():
    callback = InductionFormation()
    callback.on_validation_end(fake_trainer(10, {"val/loss": 1.0, "head_score/induction/layer0/head0": 0.9}), None)
    assert callback.record()["formation_step"] is None
    assert loss_drop_step([10], [1.0]) is None


@pytest.fixture(scope="module")
def formation_sweep(tmp_path_factory) -> Path:
    sweep = tmp_path_factory.mktemp("formation") / "sweep"
    run_train(sweep, "experiment=induction_formation", "seed=0,1", "layers=2", "max_steps=60",
              "~callbacks.attention_maps", "~callbacks.head_score_maps", "ablation=[zero]", "threads=1",
              multirun=True, timeout=900)
    return sweep


def test_a_formation_run_records_its_history(formation_sweep: Path):
    metrics = json.loads((formation_sweep / "0" / "metrics.json").read_text())
    history = metrics["formation"]
    assert history["step"] == list(range(10, 61, 10))
    assert len(history["val/loss"]) == len(history["induction"]) == 6
    assert "val/in_context_score" in metrics and "formation_step" in metrics and metrics["loss_drop_step"] in history["step"]


def test_compare_plots_the_formation_and_writes_the_heads_table(formation_sweep: Path, tmp_path: Path):
    proc = run_script(COMPARE, str(formation_sweep), "--plot", "--heads", "previous_token,induction",
                      "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    with Image.open(tmp_path / "formation.png") as image:
        assert image.size[0] > 500 and image.size[1] > 500
    table = (tmp_path / "heads.md").read_text()
    assert "| layers=2 seed=0,1" not in table  # seeds are grouped, not listed as configurations
    assert "#1 by previous_token" in table and "#1 by induction" in table and "(n=2)" in table


def test_compare_refuses_a_plot_without_history(tiny_trained_run: Path, tmp_path: Path):
    sweep = tmp_path / "sweep"
    shutil.copytree(tiny_trained_run, sweep / "0", ignore=shutil.ignore_patterns("checkpoints", "tensorboard"))
    proc = run_script(COMPARE, str(sweep), "--plot", "--out", str(tmp_path))
    assert proc.returncode == 1
    assert "formation" in proc.stderr and "Traceback" not in proc.stderr
