"""Induction heads forming: the formation record of a run, and the picture and the heads
table that compare.py draws from a sweep."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from PIL import Image

from attention_lab.analysis.prefix_matching import repeated_random_words
from attention_lab.callbacks.induction_formation import InductionFormation, loss_drop_step
from conftest import ROOT, run_in_process, run_train

COMPARE = ROOT / "scripts" / "compare.py"


def fake_trainer(step: int, metrics: dict[str, float], fn: str = "fit"):
    return SimpleNamespace(sanity_checking=False, state=SimpleNamespace(fn=fn), global_step=step,
                           callback_metrics={k: torch.tensor(v) for k, v in metrics.items()})


def test_the_formation_step_is_the_first_validation_at_which_a_head_meets_the_rule():
    """The module's model changes between validations: a positional head, then the hand-built induction circuit.
    The detector scores from the metrics (layer 0's 0.9 too) are kept, but only the rule decides."""
    from test_formation_rule import VOCAB, HandBuilt, Head, back, circuit

    probe = repeated_random_words(VOCAB, 16)
    callback = InductionFormation()
    models = [HandBuilt(Head(back(1)), Head(back(7))), HandBuilt(Head(back(1)), Head(back(8))), circuit(), circuit()]
    history = [(10, 2.0, 0.2, 0.9), (20, 1.9, 0.55, 0.9), (30, 1.0, 0.55, 0.9), (40, 0.9, 0.8, 0.9)]
    for model, (step, loss, later, first) in zip(models, history, strict=True):
        metrics = {"val/loss": loss, "head_score/induction/layer1/head0": later,
                   "head_score/induction/layer0/head0": first, "head_score/previous_token/layer0/head1": 0.6}
        callback.on_validation_end(fake_trainer(step, metrics), SimpleNamespace(model=model, prefix_probe=probe))
    callback.on_validation_end(fake_trainer(40, {"val/loss": 0.1}, fn="validate"), None)  # the final one: ignored
    record = callback.findings()
    assert record["formation_step"] == 30 and record["loss_drop_step"] == 30  # not 20, where the detector passed 0.5
    assert record["formation"]["step"] == [10, 20, 30, 40]
    assert [layers[1] for layers in record["formation"]["induction_by_layer"]] == pytest.approx([0.2, 0.55, 0.55, 0.8])
    assert [[head["head"] for head in formed] for formed in record["formation"]["formed"]] == [
        [], [], ["layer1/head0"], ["layer1/head0"]]
    restored = InductionFormation()
    restored.load_state_dict(json.loads(json.dumps(callback.state_dict())))  # a resumed run keeps the history
    assert restored.findings() == record
    older = {name: values for name, values in callback.state_dict()["history"].items() if name != "formed"}
    restored.load_state_dict({"history": older})  # a checkpoint from before the rule: no formation, no error
    assert restored.findings()["formation_step"] is None and restored.findings()["formation"]["formed"] == [None] * 4


def test_a_module_without_the_probe_forms_nothing():
    callback = InductionFormation()
    callback.on_validation_end(fake_trainer(10, {"val/loss": 1.0, "head_score/induction/layer0/head0": 0.9}), None)
    assert callback.findings()["formation_step"] is None
    assert loss_drop_step([10], [1.0]) is None


@pytest.fixture(scope="module")
def formation_sweep(tmp_path_factory) -> Path:
    sweep = tmp_path_factory.mktemp("formation") / "sweep"
    run_train(sweep, "experiment=induction_formation", "seed=0,1", "layers=2", "max_steps=30",
              "callbacks.attention_maps.images=false", "~callbacks.head_score_maps", "ablation=[zero]", "threads=1",
              multirun=True)
    return sweep


def test_a_formation_run_records_its_history(formation_sweep: Path):
    metrics = json.loads((formation_sweep / "0" / "metrics.json").read_text())
    history = metrics["formation"]
    assert history["step"] == [10, 20, 30]
    assert len(history["val/loss"]) == len(history["induction"]) == len(history["formed"]) == 3
    assert all(len(layers) == 2 for layers in history["induction_by_layer"]) and len(history["prefix_matching"]) == 3
    assert "val/in_context_score" in metrics and "formation_step" in metrics and metrics["loss_drop_step"] in history["step"]
    # The loss at each target index, per validation: the repeat of 3..8 words has 2..7 targets.
    assert len(history["loss_by_index"]) == 3 and all(len(row) == 7 for row in history["loss_by_index"])
    # The best composition of each kind, per validation: the last one is the final metrics' maximum.
    for kind in "qkv":
        final = max(value for name, value in metrics.items() if name.startswith(f"composition/{kind}/"))
        assert len(history[f"composition_{kind}"]) == 3 and 0 < history[f"composition_{kind}"][-1] <= 1
        assert history[f"composition_{kind}"][-1] == pytest.approx(final, rel=1e-5)
    assert history["loss_by_index"][-1] == pytest.approx([metrics[f"val/loss_by_index/{i}"] for i in range(7)], rel=1e-5)


def test_compare_plots_the_formation_and_writes_the_heads_table(formation_sweep: Path, tmp_path: Path):
    proc = run_in_process(COMPARE, str(formation_sweep), "--plot", "--heads", "previous_token,induction",
                      "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    with Image.open(tmp_path / "formation.png") as image:
        assert image.size[0] > 500 and image.size[1] > 500
    with Image.open(tmp_path / "loss_by_index.png") as image:  # one heatmap per seed
        assert image.size[0] > 400 and image.size[1] > 200
    table = (tmp_path / "heads.md").read_text()
    assert "| layers=2 seed=0,1" not in table  # seeds are grouped, not listed as configurations
    assert "#1 by previous_token" in table and "#1 by induction" in table and "(n=2)" in table


def test_compare_refuses_a_plot_without_history(tiny_trained_run: Path, tmp_path: Path):
    sweep = tmp_path / "sweep"
    shutil.copytree(tiny_trained_run, sweep / "0", ignore=shutil.ignore_patterns("checkpoints", "tensorboard"))
    proc = run_in_process(COMPARE, str(sweep), "--plot", "--out", str(tmp_path))
    assert proc.returncode == 1
    assert "formation" in proc.stderr and "Traceback" not in proc.stderr


def test_formation_labels_name_a_few_seeds_and_count_many():
    from matplotlib.figure import Figure

    from attention_lab.plotting.formation import NAMED_SEEDS, label_formations

    ax = Figure().add_subplot()
    many = [(str(seed), "red", 0.5) for seed in range(NAMED_SEEDS + 2)]
    label_formations(ax, {90: [("3", "red", 0.5), ("4", "red", 0.6)], 100: [("7", "blue", 0.5)], 110: many})
    assert [text.get_text() for text in ax.texts] == ["seeds 3, 4", "seed 7", f"{NAMED_SEEDS + 2} seeds"]
