"""scripts/train.py end to end, as a user runs it: fast_dev_run of every model, a real training run that
solves its task (shared with the TensorBoard tests), what a run dir and its event files hold, and the
sweeps (basic -m, Optuna, the parallel launcher's processes) and the 2-process DDP simulation on CPU."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.hparams import metadata as hparams_metadata

from attention_lab.analysis.head_scores import HEAD_SCORE_KINDS
from attention_lab.callbacks.head_score_maps import image_tag
from attention_lab.callbacks.steps_to_solve import SOLVED
from attention_lab.config import register_configs
from attention_lab.records.files import tensorboard_dir
from attention_lab.tensorboard_logger import tensorboard_tag
from conftest import SINGLE_THREAD_ENV, SOLVED_RUN_MAX_STEPS, compose_config, run_train, run_train_process

MODELS = ["simple", "self", "cross", "multihead", "multihead_concat"]
# A few real steps with validation (at steps 3 and 6) and attention maps: enough for every run-dir file.
TINY = ["max_steps=6", "task.train_size=256", "task.val_size=64", "trainer.val_check_interval=3",
        "log_attention_every_n_steps=3"]
PNG = b"\x89PNG\r\n\x1a\n"
# Where a test reads no image: the final validation draws none.
NO_IMAGES = ["callbacks.attention_maps.images=false", "~callbacks.head_score_maps", "ablation=[]"]


def job_dirs(sweep_dir: Path) -> list[Path]:
    return sorted((p for p in sweep_dir.iterdir() if p.is_dir() and p.name.isdigit()), key=lambda p: int(p.name))


def overrides_of(run_dir: Path) -> list[str]:
    return list(OmegaConf.load(run_dir / ".hydra" / "overrides.yaml"))


def metrics_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.fixture(scope="module")
def debug_sweep(tmp_path_factory) -> Path:
    """`-m model=<all five> debug=fast`: one fast_dev_run (one training and one validation batch) per model."""
    sweep_dir = tmp_path_factory.mktemp("debug_sweep") / "sweep"
    with pytest.MonkeyPatch.context() as mp:
        for key, value in SINGLE_THREAD_ENV.items():
            mp.setenv(key, value)
        run_train(sweep_dir, f"model={','.join(MODELS)}", "debug=fast", multirun=True)
    return sweep_dir


@pytest.fixture(scope="module")
def events(solved_run: Path) -> EventAccumulator:
    accumulator = EventAccumulator(str(tensorboard_dir(solved_run)),
                                   size_guidance={"scalars": 0, "images": 0, "tensors": 0})
    return accumulator.Reload()


@pytest.fixture(scope="module")
def solved_cfg(solved_run: Path):
    register_configs()  # the saved config's interpolations use the lab's resolvers, also when no test composed yet
    return OmegaConf.load(solved_run / ".hydra" / "config.yaml")


# --- fast_dev_run of every model, and the basic multirun sweep that ran them --------------------------------

@pytest.mark.parametrize("model", MODELS)
def test_fast_dev_run(debug_sweep: Path, model: str):
    (run_dir,) = [d for d in job_dirs(debug_sweep) if f"model={model}" in overrides_of(d)]
    metrics = metrics_of(run_dir)
    assert metrics["global_step"] == 1  # fast_dev_run: one training batch ...
    assert 0.0 <= metrics["val/seq_acc"] <= 1.0 and metrics["val/loss"] > 0  # ... and a validation pass


def test_multirun_sweep_gives_each_job_its_own_dir(debug_sweep: Path):
    jobs = job_dirs(debug_sweep)
    assert [d.name for d in jobs] == [str(i) for i in range(len(MODELS))]
    assert (debug_sweep / "multirun.yaml").is_file()
    for job in jobs:
        assert {p.name for p in (job / ".hydra").iterdir()} >= {"config.yaml", "hydra.yaml", "overrides.yaml"}
        assert OmegaConf.load(job / ".hydra" / "hydra.yaml").hydra.runtime.output_dir == str(job)
    assert sorted(o for d in jobs for o in overrides_of(d) if o.startswith("model=")) == sorted(f"model={m}" for m in MODELS)


# --- a real training run: the default experiment solves its task -------------------------------------------

def test_default_experiment_reaches_099_val_sequence_accuracy(solved_run: Path, solved_cfg):
    assert (solved_cfg.model.name, solved_cfg.model.num_heads, solved_cfg.layers, solved_cfg.task.name) == (
        "multihead", 4, 2, "reverse")  # nothing but the step bound and the stop threshold overridden
    metrics = metrics_of(solved_run)
    assert metrics["val/seq_acc"] >= SOLVED, metrics
    assert metrics["val/token_acc"] >= SOLVED
    assert 0 < metrics["global_step"] <= SOLVED_RUN_MAX_STEPS


def test_steps_to_solve_is_the_first_validation_at_099(solved_run: Path, events):
    """metrics.json's steps_to_solve, checked against the val/seq_acc curve TensorBoard holds."""
    curve = [(event.step, event.value) for event in events.Scalars(tensorboard_tag("val/seq_acc"))]
    first = next(step for step, value in curve if value >= 0.99)
    # Lightning plots the validation that follows n training steps at step n - 1 (the last training step's
    # index); steps_to_solve counts the steps taken, as global_step does.
    assert metrics_of(solved_run)["steps_to_solve"] == first + 1
    assert events.Scalars("hp/steps_to_solve")[-1].value == first + 1  # beside the final metrics in HParams


def test_the_default_run_stops_when_it_is_solved(solved_run: Path):
    """One rule for "solved" and for early stopping: the run takes no step after its steps_to_solve."""
    metrics = metrics_of(solved_run)
    assert metrics["steps_to_solve"] is not None and metrics["global_step"] == metrics["steps_to_solve"], metrics


def test_solved_and_early_stopping_share_one_threshold():
    import hydra

    from attention_lab.callbacks.steps_to_solve import StepsToSolve, StopWhenSolved

    early_stopping = compose_config().callbacks.early_stopping
    # the config names the callback and no threshold of its own: the one written in steps_to_solve.py
    assert hydra.utils.get_class(early_stopping._target_) is StopWhenSolved and "threshold" not in early_stopping
    assert StopWhenSolved().threshold == StepsToSolve().threshold == SOLVED  # written once


def test_run_dir_layout(solved_run: Path):
    assert {p.name for p in (solved_run / ".hydra").iterdir()} >= {"config.yaml", "hydra.yaml", "overrides.yaml"}
    assert (solved_run / "checkpoints" / "last.ckpt").is_file()
    assert (solved_run / "checkpoints" / "best.ckpt").is_file()
    assert (solved_run / "metrics.json").is_file()
    assert list(tensorboard_dir(solved_run).glob("events.out.tfevents.*"))


def test_best_checkpoint_holds_the_solved_model(solved_run: Path, solved_cfg):
    """Rebuilt from the checkpoint alone (hyperparameters and vocabulary inside), it scores on the
    validation set what the run reported."""
    import hydra
    import torch

    from attention_lab.lit_module import AttentionLitModule

    module = AttentionLitModule.load_from_checkpoint(solved_run / "checkpoints" / "best.ckpt", map_location="cpu",
                                                     weights_only=True)
    datamodule = hydra.utils.instantiate(solved_cfg.data)
    datamodule.setup("validate")
    assert module.vocab == datamodule.vocab.itos
    inputs, targets = datamodule.val_set.tensors
    module.eval()
    with torch.no_grad():
        logits = module(inputs)
    real = targets != 0
    seq_acc = ((logits.argmax(-1) == targets) | ~real).all(dim=1).float().mean().item()
    assert seq_acc >= SOLVED


# --- what TensorBoard reads: the event files of that run --------------------------------------------------

def test_events_hold_an_attention_map_for_every_layer_and_head(events, solved_cfg, solved_run: Path):
    final_step = metrics_of(solved_run)["global_step"]
    expected = {f"attention/layer{layer}/head{head}" for layer in range(solved_cfg.layers)
                for head in range(solved_cfg.model.num_heads)}
    # Beside the attention maps: one heatmap per head score kind (random sequences of 3-8 of 17 words repeat words
    # in the first validation batch, so the induction score exists too).
    head_scores = {image_tag(f"head_score/{kind}") for kind in HEAD_SCORE_KINDS}
    # ... and one per ablation, measured at the end of training.
    ablations = {image_tag(f"ablation/{how}/{metric}") for how in ("zero", "mean") for metric in ("loss", "token_acc")}
    # ... and the validation loss by target index over training (one step x index heatmap).
    assert set(events.Tags()["images"]) == expected | head_scores | ablations | {"val/loss_by_index"}
    for tag in expected:
        images = events.Images(tag)
        steps = [image.step for image in images]
        # the final model's: the attention tab has every logged step (test_tensorboard_server.py)
        assert steps == [final_step], (tag, steps)
        assert images[-1].encoded_image_string.startswith(PNG)
        assert images[-1].width > 200 and images[-1].height > 200


def test_events_hold_the_scalars(events, solved_cfg, solved_run: Path):
    scalars = set(events.Tags()["scalars"])
    for stage in ("train", "val"):  # the learning curves, in the section TensorBoard shows first
        assert {tensorboard_tag(f"{stage}/{metric}") for metric in ("loss", "token_acc", "seq_acc")} <= scalars
    assert "lr-AdamW" in scalars
    assert events.Scalars("lr-AdamW")[-1].value == pytest.approx(solved_cfg.lr)
    assert {f"attention_entropy/layer{layer}/head{head}" for layer in range(solved_cfg.layers)
            for head in range(solved_cfg.model.num_heads)} <= scalars
    final = events.Scalars(tensorboard_tag("val/seq_acc"))[-1]
    metrics = metrics_of(solved_run)
    assert (final.step, final.value) == (metrics["global_step"], pytest.approx(metrics["val/seq_acc"]))
    assert len(events.Scalars(tensorboard_tag("train/loss"))) > 1


def test_events_hold_hparams_with_the_final_metrics(events, solved_run: Path):
    content = events.PluginTagToContent(hparams_metadata.PLUGIN_NAME)
    assert {hparams_metadata.EXPERIMENT_TAG, hparams_metadata.SESSION_START_INFO_TAG} <= set(content)
    start = hparams_metadata.parse_session_start_info_plugin_data(content[hparams_metadata.SESSION_START_INFO_TAG])
    hparams = {key: value.string_value or value.number_value for key, value in start.hparams.items()}
    assert {"model": "multihead", "heads": 4, "layers": 2, "mask": "padding", "task": "reverse"}.items() <= hparams.items()
    experiment = hparams_metadata.parse_experiment_plugin_data(content[hparams_metadata.EXPERIMENT_TAG])
    metric_tags = {info.name.tag for info in experiment.metric_infos}
    assert {"hp/val_seq_acc", "hp/val_token_acc", "hp/val_loss"} <= metric_tags
    metrics = metrics_of(solved_run)
    assert events.Scalars("hp/val_seq_acc")[-1].value == pytest.approx(metrics["val/seq_acc"])
    assert "hp_metric" not in events.Tags()["scalars"]  # no -1 placeholder


def test_events_hold_predictions_beside_targets(events):
    assert "predictions/text_summary" in events.Tags()["tensors"]
    table = events.Tensors("predictions/text_summary")[-1].tensor_proto.string_val[0].decode()
    assert table.startswith("| input | target | prediction | ok |")
    assert len(table.splitlines()) >= 3


# --- distributed and sweeps ---------------------------------------------------------------------------------

def test_ddp_sim_trains_in_two_gloo_processes(tmp_path: Path, single_thread):
    run_dir = tmp_path / "ddp"
    # A process of its own: the forked ranks print their lines to the process's stderr, past an in-process capture.
    proc = run_train_process(run_dir, "trainer=ddp_sim", *TINY)
    log = proc.stdout + proc.stderr
    # Each rank announces itself (Lightning's banner that names gloo is INFO of rank_zero, which the quiet console
    # drops; accelerator=cpu is what makes DDP pick gloo, test_configs.py), for fit and the final validation.
    for rank in (0, 1):
        assert log.count(f"Initializing distributed: GLOBAL_RANK: {rank}, MEMBER: {rank + 1}/2") == 2, log[-3000:]
    assert "val/seq_acc" in metrics_of(run_dir)
    # The ranks trained: their checkpoints hold all 6 steps. (metrics.json's global_step reads the main
    # process's trainer, which the ranks do not update.)
    import torch

    for name in ("last", "best"):
        checkpoint = torch.load(run_dir / "checkpoints" / f"{name}.ckpt", map_location="cpu", weights_only=True)
        assert checkpoint["global_step"] == 6


def test_optuna_sweep_two_trials(tmp_path: Path, single_thread):
    sweep_dir = tmp_path / "optuna"
    run_train(sweep_dir, "hparams_search=optuna", "hydra.sweeper.n_trials=2", "debug=fast", *NO_IMAGES, multirun=True)
    jobs = job_dirs(sweep_dir)
    assert len(jobs) == 2 and all((job / "metrics.json").is_file() for job in jobs)
    results = OmegaConf.load(sweep_dir / "optimization_results.yaml")
    assert results.name == "optuna"
    assert set(results.best_params) == {"lr", "heads", "layers"}
    # The sweeper maximised what train.py returned: the jobs' optimized_metric.
    assert results.best_value == pytest.approx(max(metrics_of(job)["val/seq_acc"] for job in jobs))


# --- the headline numbers ---------------------------------------------------------------------------

def test_headline_command_solves_its_task(tmp_path: Path, single_thread):
    """`python scripts/train.py model=multihead heads=3` reaches >= 0.99 val/seq_acc on its default task."""
    run_dir = tmp_path / "heads3"
    # The command as written, less the figures of its validations (they do not change what it learns).
    run_train(run_dir, "model=multihead", "heads=3", f"max_steps={SOLVED_RUN_MAX_STEPS}",
              "callbacks.attention_maps.images=false", "~callbacks.head_score_maps", "ablation=[]")
    assert metrics_of(run_dir)["val/seq_acc"] >= SOLVED


@pytest.mark.slow  # 2 x 800 steps
def test_mask_ablation_shows_that_causal_masking_cannot_reverse(tmp_path: Path, single_thread):
    sweep_dir = tmp_path / "ablation"
    run_train(sweep_dir, "experiment=mask_ablation", multirun=True)
    by_mask = {}
    for job in job_dirs(sweep_dir):
        (mask,) = [o.split("=", 1)[1] for o in overrides_of(job) if re.fullmatch(r"mask=\w+", o)]
        by_mask[mask] = metrics_of(job)["val/seq_acc"]
    assert set(by_mask) == {"none", "causal"}
    assert by_mask["none"] >= 0.9 and by_mask["causal"] <= 0.05, by_mask
