"""The experiments that ship with the lab (configs/experiment/): each composes into the sweep docs/experiments.md
describes, every job is a valid config, and the differences docs/experiments.md reports show up in short versions
of them (one seed; its tables have five)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hydra import compose

from attention_lab.checks import validate
from attention_lab.run.overrides import hydra_compose_api
from attention_lab.run.sweep_jobs import planned_jobs, sweep_arguments, sweep_job_configs
from conftest import CONFIG_DIR, OBSERVERS_OFF, run_train

PRESETS = {  # preset -> (the settings it sweeps, jobs)
    "induction_heads": ({"layers": ["1", "2"], "seed": ["0", "1", "2", "3", "4"]}, 10),
    "induction_formation": ({"layers": ["1", "2"], "seed": ["0", "1", "2", "3", "4"]}, 10),
    "length_generalisation": ({"position": ["learned", "sinusoidal", "rope", "alibi", "none"],
                               "seed": ["0", "1", "2", "3", "4"]}, 25),
    "kv_heads": ({"kv_heads": ["4", "2", "1"], "seed": ["0", "1", "2", "3", "4"]}, 15),
    "mask_ablation": ({"mask": ["none", "causal"]}, 2),
}  # experiment=zoology (48 jobs) and experiment=mqar (a ladder: 432 jobs in its first rung): tests/data/test_zoology.py
# and tests/data/test_mqar.py


@pytest.mark.parametrize("preset", PRESETS)
def test_the_preset_is_the_sweep_the_docs_describe(preset):
    swept, count = PRESETS[preset]
    # Every job composes and passes the checks. No rule reads the seed: one seed's jobs stand for the others'.
    one_seed = ["seed=0"] if "seed" in swept else []
    with hydra_compose_api(CONFIG_DIR):
        sweep = compose("train", overrides=[f"experiment={preset}"], return_hydra_config=True)
        configs = sweep_job_configs([f"experiment={preset}", *one_seed], "train", validate)  # distinct runs, distinct dirs
    assert {key: value.split(",") for key, value in sweep.hydra.sweeper.params.items()} == swept
    assert len(planned_jobs(sweep_arguments(sweep, []))) == count  # the jobs the sweeper launches
    assert len(configs) == count // len(swept.get("seed", [None]))


def test_what_the_presets_hold_fixed():
    with hydra_compose_api(CONFIG_DIR):
        (induction,) = sweep_job_configs(["experiment=induction_heads", "layers=2", "seed=0"], "train", validate)
        (length,) = sweep_job_configs(["experiment=length_generalisation", "position=rope", "seed=0"], "train", validate)
        (kv,) = sweep_job_configs(["experiment=kv_heads", "kv_heads=1", "seed=0"], "train", validate)
        (formation,) = sweep_job_configs(["experiment=induction_formation", "layers=2", "seed=0"], "train", validate)
    assert (induction.task.name, induction.mask, induction.callbacks.early_stopping) == ("induction", "causal", None)
    assert (length.task.name, length.task.options.delay, length.mask, length.optimized_metric) == (
        "copy", 1, "causal", "ood/seq_acc")
    assert (length.task.max_len, length.task.ood_min_len, length.task.ood_max_len) == (8, 9, 16)
    assert (kv.model.name, kv.model.num_heads, kv.model.kv_heads, kv.task.options) == (
        "multihead", 4, 1, {"pairs": 5, "queries": 3})
    # Attention-only transformers (residual and LayerNorm, no MLP), validated often enough to see the heads form.
    assert (formation.task.name, formation.mask, formation.callbacks.early_stopping) == ("induction", "causal", None)
    assert (formation.model.block.residual, formation.model.block.mlp, formation.trainer.val_check_interval) == (True, False, 10)
    # The threshold is the rule's own (analysis/formation_rule.py), not restated in the preset.
    assert "threshold" not in formation.callbacks.induction_formation


def metrics(job: Path) -> dict:
    return json.loads((job / "metrics.json").read_text())


def test_two_layers_find_induction_and_one_does_not(tmp_path: Path, single_thread):
    sweep = tmp_path / "induction"
    # 200 of the preset's 600 steps: the differences below already hold, with seed 0 and with seed 1.
    run_train(sweep, "experiment=induction_heads", "seed=0", "max_steps=200", *OBSERVERS_OFF, multirun=True)
    one, two = metrics(sweep / "0"), metrics(sweep / "1")
    assert (one["hparams"]["layers"], two["hparams"]["layers"]) == (1, 2)
    assert two["val/seq_acc"] >= 0.95 and one["val/seq_acc"] <= 0.85, (one["val/seq_acc"], two["val/seq_acc"])
    best_in_layer_1 = max(v for k, v in two.items() if k.startswith("head_score/induction/layer1/"))
    assert best_in_layer_1 >= 0.6  # the second layer's heads attend where the next word is
    # Every head was switched off at the end: removing a whole layer costs more than removing any one of its heads.
    for how in ("zero", "mean"):
        for metric in ("loss", "token_acc"):
            for layer in range(2):
                family = f"ablation/{how}/{metric}/layer{layer}"
                single = max(two[f"{family}/head{h}"] for h in range(4))
                assert two[f"{family}/all"] > single, (family, two[f"{family}/all"], single)


def test_rope_carries_over_to_longer_inputs_and_learned_positions_do_not(tmp_path: Path, single_thread):
    sweep = tmp_path / "length"
    # 150 of the preset's 800 steps: the differences below already hold, with seed 0 and with seed 1.
    run_train(sweep, "experiment=length_generalisation", "seed=0", "position=learned,rope", "max_steps=150",
              *OBSERVERS_OFF, multirun=True)
    learned, rope = metrics(sweep / "0"), metrics(sweep / "1")
    assert learned["val/seq_acc"] >= 0.99 and rope["val/seq_acc"] >= 0.99  # both solve the lengths they saw
    assert learned["ood/seq_acc"] <= 0.05 and rope["ood/seq_acc"] >= 0.5, (learned["ood/seq_acc"], rope["ood/seq_acc"])
