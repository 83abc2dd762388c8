"""What a run says says what it did: a hybrid stack's state and skipped circuits layer by layer, a formation rule
and a solve rule that can disagree named as two rules, an argparse-style setting answered in one line, no progress
bar fragments in a captured log, metrics.json headline first, and the Images dashboard opening on the attention
maps with grids drawn as wide as its card."""

from __future__ import annotations

import contextlib
import io
import json
import logging
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf
from PIL import Image

from attention_lab.config import ModelConfig, typed
from attention_lab.model import SequenceModel
from conftest import TRAIN, compose_config, run_in_process

CAUSAL = ["mask=causal", "task=induction"]


def built(overrides: list[str]) -> SequenceModel:
    cfg = compose_config(overrides)
    torch.manual_seed(0)
    return SequenceModel(typed(ModelConfig, OmegaConf.to_container(cfg.model, resolve=True)), 12)


# --- a hybrid stack, layer by layer ------------------------------------------------------------------------------

def test_the_kv_cache_line_names_each_layers_cache_or_state():
    from attention_lab.analysis.layer_memory import memory_line
    from attention_lab.attention import ATTENTION_REGISTRY

    d_model, heads, length = 48, 4, 16  # the defaults: d_model=48, heads=4, model.context_length=16
    state = ATTENTION_REGISTRY["gated_deltanet"].state_size(d_model, heads, length)  # what the variant declares
    # a multihead layer caches a key and a value of d_model numbers per token
    assert memory_line(built(["mixers=[gated_deltanet,multihead]", *CAUSAL])) == (
        f"{2 * d_model} numbers, in layer 1 (multihead); layer 0 (gated_deltanet) keeps a state of {state} numbers "
        "instead")
    assert memory_line(built(["model=gated_deltanet", *CAUSAL])) == (
        f"none: layers 0, 1 (gated_deltanet) keep a state of {state} numbers each instead")
    assert memory_line(built([])) == f"{2 * 2 * d_model} numbers over 2 layers"


def test_circuit_scores_name_the_layers_they_skip_and_why(caplog):
    from attention_lab.callbacks.circuit_scores import CircuitScores

    model = built(["mixers=[gated_deltanet,multihead]", *CAUSAL])
    module = SimpleNamespace(model=model, config=model.config, log=lambda *args, **kwargs: None)
    with caplog.at_level(logging.INFO, logger="attention_lab"):
        CircuitScores().on_validation_epoch_end(SimpleNamespace(sanity_checking=False), module)
    [line] = [record.getMessage() for record in caplog.records if "circuit scores" in record.getMessage()]
    assert line == ("circuit scores: layer 0 (gated_deltanet) has no per-head W_Q/W_K/W_V/W_O of the multihead "
                    "shape; measured layer 1")


# --- the formation rule beside the solve rule ---------------------------------------------------------------------

def one_layer_history(threshold: float = 0.4) -> dict:
    """A 1-layer run's formation history: its detector scores pass 0.5, its prefix matching stays below the rule's."""
    return {"threshold": threshold, "step": [10, 20], "induction": [0.3, 0.9], "prefix_matching": [0.2, 0.26],
            "formed": [[], []]}


def test_a_run_without_a_formation_step_says_why_in_the_rules_words():
    from attention_lab.train import metrics_table

    one_layer = metrics_table({"val/seq_acc": 0.998, "steps_to_solve": 260, "formation_step": None,
                               "formation": one_layer_history()})
    assert "formation_step  not formed: no head's prefix matching reached 0.4 (best 0.26)" in one_layer
    kept = metrics_table({"formation_step": None, "formation": {**one_layer_history(0.6),
                                                                "prefix_matching": [0.2, 0.7]}})
    assert ("formation_step  not formed: heads reached 0.6 in prefix matching but kept it with the previous "
            "token's supply removed") in kept


def test_a_solved_run_that_trains_on_says_so_where_it_stops(tmp_path: Path):
    from attention_lab.callbacks.lifecycle import RunEndNote
    from attention_lab.callbacks.signals import StopSignals
    from attention_lab.callbacks.steps_to_solve import StepsToSolve, StopWhenSolved

    solved = StepsToSolve()
    solved.step = 260

    def reason(*callbacks) -> str:
        note = RunEndNote(StopSignals(), tmp_path)
        note.on_fit_end(SimpleNamespace(callbacks=[*callbacks, note], global_step=400, max_steps=400,
                                        max_epochs=None), None)
        return note.reason

    assert reason(solved) == ("max_steps=400 reached (solved at step 260; this run trains past solving: its stop "
                              "when solved, callbacks.early_stopping, is off)")
    assert reason(StepsToSolve()) == "max_steps=400 reached"  # not solved: nothing to explain
    assert reason(StopWhenSolved(), StepsToSolve()) == "max_steps=400 reached"


def test_the_formation_plot_words_the_rule(tmp_path: Path):
    import matplotlib
    from test_compare import write_job

    from attention_lab.review.formation_plot import formation_figure
    from attention_lab.review.sweep import collect_sweep

    sweep = tmp_path / "sweep"
    for job, (layers, best) in enumerate(((1, [0.2, 0.26]), (2, [0.2, 0.7]))):
        history = {**one_layer_history(), "val/loss": [2.0, 1.0], "previous_token": [0.5, 0.6],
                   "composition_k": [0.1, 0.2], "prefix_matching": best}
        write_job(sweep, job, [f"layers={layers}", "seed=0"], run_info={"status": "ok", "wall_time_s": 1.0},
                  metrics={"val/seq_acc": 1.0, "global_step": 20, "formation_step": None if layers == 1 else 20,
                           "formation": history})
    (sweep / "multirun.yaml").write_text("hydra:\n  overrides:\n    task:\n    - layers=1,2\n    - seed=0\n")
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # the words as text in the SVG
        formation_figure(collect_sweep(sweep), tmp_path / "formation.svg")
    words = (tmp_path / "formation.svg").read_text()
    assert "formation: a head's prefix matching &gt;= 0.4, and &lt; 0.4 with the layers below zeroed" in words
    assert "best prefix matching" in words


# --- the command line ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("argv", "line"), [
    (["--heads", "3"], "error: --heads 3 is not how a setting is given: use heads=3 "),
    (["--max-steps=10", "heads=2"], "error: --max-steps=10 is not how a setting is given: use max_steps=10 "),
    (["--smeared_keys"], "error: --smeared_keys is not how a setting is given: use smeared_keys=true "),
])
def test_an_argparse_style_setting_is_one_line_naming_the_setting(argv, line, tmp_path: Path):
    proc = run_in_process(TRAIN, *argv, f"hydra.run.dir={tmp_path / 'run'}")
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.splitlines() == [line + "(python scripts/train.py --help lists them)"], proc.stderr
    assert not (tmp_path / "run").exists()


def test_hydras_own_options_and_their_prefixes_are_left_to_hydra():
    from attention_lab.run.cli import DashedSetting, check_dashed_settings

    check_dashed_settings(["--cfg", "job", "--resolve", "--multi", "heads=1,2", "--config-name=train", "-m"])
    with pytest.raises(DashedSetting) as refused:
        check_dashed_settings(["--cfg", "job", "--lr", "0.01"])
    assert (refused.value.given, refused.value.override) == ("--lr 0.01", "lr=0.01")


# --- a console captured to a file ---------------------------------------------------------------------------------

def tiny_fit(callback) -> str:
    """Three training steps of a one-weight model with ``callback`` as the progress bar: what it wrote to stdout."""
    import lightning as L

    class Tiny(L.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(1))

        def training_step(self, batch, batch_idx):
            return ((self.weight - batch[0]) ** 2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(6, 1)), batch_size=2)
    trainer = L.Trainer(max_steps=3, logger=False, enable_checkpointing=False, enable_model_summary=False,
                        accelerator="cpu", callbacks=[callback])
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        trainer.fit(Tiny(), train_dataloaders=data)
    return out.getvalue()


def test_a_console_that_is_not_a_terminal_gets_no_progress_bar_fragments(monkeypatch):
    from attention_lab.callbacks.lifecycle import ProgressBar

    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    assert tiny_fit(ProgressBar()) == ""  # stdout is a StringIO: no terminal
    monkeypatch.setenv("FORCE_COLOR", "1")  # Rich's way to say that a stream is a terminal
    assert "Epoch 0" in tiny_fit(ProgressBar())


def test_the_training_numbers_go_to_the_progress_bar_only_when_one_is_drawn(monkeypatch, tmp_path):
    import lightning as L
    from hydra.utils import instantiate

    from attention_lab.callbacks.lifecycle import ProgressBar

    cfg = compose_config(["max_steps=4", "batch_size=8"])
    datamodule = instantiate(cfg.data)
    shown = {}
    for terminal in (False, True):
        monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
        if terminal:
            monkeypatch.setenv("FORCE_COLOR", "1")  # Rich's way to say that a stream is a terminal
        else:
            monkeypatch.delenv("FORCE_COLOR", raising=False)
        trainer = L.Trainer(max_steps=4, log_every_n_steps=2, limit_val_batches=0, logger=False,
                            enable_checkpointing=False, enable_model_summary=False, accelerator="cpu",
                            default_root_dir=tmp_path, callbacks=[ProgressBar()])
        with contextlib.redirect_stdout(io.StringIO()):
            trainer.fit(instantiate(cfg.module, vocab=datamodule.vocab.itos), datamodule=datamodule)
        shown[terminal] = set(trainer.progress_bar_metrics)
    assert shown == {False: set(), True: {"loss", "acc"}}


# --- metrics.json ------------------------------------------------------------------------------------------------

def test_metrics_json_opens_with_the_headline(tiny_trained_run: Path):
    keys = list(json.loads((tiny_trained_run / "metrics.json").read_text()))
    assert keys[:8] == ["val/loss", "val/token_acc", "val/seq_acc", "global_step", "params", "state_size",
                        "steps_to_solve", "hparams"]
    from attention_lab.records.metrics_file import per_head

    rest = keys[8:]
    index = [key for key in rest if key.startswith("val/loss_by_index/")]
    assert index == [f"val/loss_by_index/{i}" for i in range(len(index))] and rest[:len(index)] == index
    assert all(per_head(key) for key in rest[len(index):]) and rest[len(index):] == sorted(rest[len(index):])


def test_the_order_puts_histories_last_and_indices_in_number_order():
    from attention_lab.records.metrics_file import headline_first

    metrics = {"ablation/zero/loss/layer0/all": 0.1, "formation": {"step": [10]}, "val/loss_by_index/10": 1.0,
               "val/loss_by_index/2": 2.0, "hparams": {"heads": 4}, "formation_step": 30, "ood/loss": 0.5,
               "val/loss": 0.2, "gated/gate/layer0/head1": 0.4, "global_step": 40}
    assert list(headline_first(metrics)) == [
        "val/loss", "ood/loss", "formation_step", "global_step", "hparams", "val/loss_by_index/2",
        "val/loss_by_index/10", "ablation/zero/loss/layer0/all", "gated/gate/layer0/head1", "formation"]


# --- the Images dashboard ----------------------------------------------------------------------------------------

def test_the_images_dashboard_opens_on_the_attention_maps_and_grids_fill_its_card(tmp_path: Path):
    from lightning.pytorch.loggers import TensorBoardLogger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from test_attention_maps import FakeModule

    from attention_lab.callbacks.head_score_maps import HeadScoreMaps
    from attention_lab.callbacks.probe_logging import ProbeLogger

    logger = TensorBoardLogger(save_dir=str(tmp_path), name="", version="")
    families = ("ablation/zero/loss", "ablation/mean/token_acc", "head_score/previous_token", "patching/logit_diff")
    metrics = {f"{family}/layer{layer}/head{head}": torch.tensor(0.1 * head + layer)
               for family in families for layer in range(2) for head in range(4)}
    trainer = SimpleNamespace(loggers=[logger], global_step=250, sanity_checking=False,
                              state=SimpleNamespace(fn="validate"), callback_metrics=metrics)
    HeadScoreMaps().on_validation_end(trainer, None)
    logger.experiment.flush()
    events = EventAccumulator(logger.log_dir, size_guidance={"images": 0})
    events.Reload()
    grids = events.Tags()["images"]
    maps = [tag for tag, _, _ in ProbeLogger(run_name="run").heatmaps(FakeModule(encoder_decoder=False),
                                                                       ["Life", "is"], 250)]
    # TensorBoard sorts the tags by character codes and opens the first sections: the attention maps first.
    assert len(grids) == len(families) and max(maps) < min(grids), (maps, grids)
    card = 350  # px: TensorBoard 2.21's image card (tf-image-loader's `width: 350px`), every image scaled to it
    for tag in grids:  # 2 layers x 4 heads: nearly as wide as that card (the widest title fits), never wider
        width = Image.open(io.BytesIO(events.Images(tag)[0].encoded_image_string)).size[0]
        assert 0.85 * card <= width <= card, (tag, width)


def test_a_grid_too_wide_for_the_card_keeps_the_lab_dpi():
    from attention_lab.callbacks.head_score_maps import grid_dpi
    from attention_lab.plotting.heatmaps import DPI

    assert grid_dpi(np.zeros((4, 16)).tolist()) == DPI
