"""Clamping heads during training (callbacks/clamping.py): what the clamped heads output, in which steps and
validations, what their weights learn meanwhile, and what the run records. Tiny models trained for a few steps in
process; the head outputs are read through hook points attached around the clamp's own edit."""

from __future__ import annotations

import json
import types
from contextlib import ExitStack

import lightning as L
import pytest
import torch
import yaml
from hydra import compose
from hydra.utils import instantiate
from omegaconf import OmegaConf

from attention_lab.analysis.ablation import head_output_name
from attention_lab.analysis.patching import patched_layers
from attention_lab.attention.declared import declared_variants
from attention_lab.attention.hooks import capture, intervene
from attention_lab.callbacks.clamping import Clamping
from attention_lab.callbacks.head_ablation import HeadAblation
from attention_lab.checks import validate
from attention_lab.data.corpus import PAD_ID
from attention_lab.lit_module import AttentionLitModule
from attention_lab.run.overrides import hydra_compose_api
from attention_lab.run.sweep_jobs import planned_jobs, sweep_arguments, sweep_job_configs
from conftest import CONFIG_DIR, OBSERVERS_OFF, compose_config, run_train

TINY = ["task=induction", "mask=causal", "layers=2", "heads=2", "d_model=16", "task.train_size=64",
        "task.val_size=32", "batch_size=16"]
LAYER = head_output_name(0)
CLAMPED, FREE = 1, 0  # heads of layer 0


class Recorder(L.Callback):
    """Layer 0's head outputs of every forward pass, before the clamp (a keeper attached at setup, ahead of the
    clamp's when listed before it) and after it (attached at each batch's start, behind it), by phase and step;
    the inputs of each pass; and the gradients of layer 0's query, key and value rows per head after each backward."""

    def __init__(self) -> None:
        self.passes: dict[tuple[str, int], list[tuple[torch.Tensor, torch.Tensor]]] = {}
        self.inputs: dict[tuple[str, int], torch.Tensor] = {}
        self.grads: dict[int, list[float]] = {}
        self.before: torch.Tensor | None = None
        self.kept = ExitStack()
        self.batch = ExitStack()

    def setup(self, trainer, pl_module, stage):
        def keep(tensor):
            self.before = tensor.detach().clone()
            return tensor
        self.kept.enter_context(intervene(pl_module.model, {LAYER: keep}))

    def teardown(self, trainer, pl_module, stage):
        self.kept.close()

    def open(self, trainer, pl_module, phase, batch):
        key = (phase, trainer.global_step)
        self.inputs.setdefault(key, batch[0])
        passes = self.passes.setdefault(key, [])

        def after(tensor):
            passes.append((self.before, tensor.detach().clone()))
            return tensor
        self.batch.enter_context(intervene(pl_module.model, {LAYER: after}))

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
        self.open(trainer, pl_module, "train", batch)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        self.batch.close()

    def on_validation_batch_start(self, trainer, pl_module, batch, batch_idx, dataloader_idx=0):
        self.open(trainer, pl_module, "validate" if trainer.state.fn == "validate" else "val", batch)

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0):
        self.batch.close()

    def on_after_backward(self, trainer, pl_module):
        attention = pl_module.model.blocks[0].attention
        width = attention.head_dim
        self.grads[trainer.global_step] = [
            float(sum(w.weight.grad[h * width:(h + 1) * width].abs().sum()
                      for w in (attention.W_query, attention.W_key, attention.W_value)))
            for h in range(attention.num_heads)]


def fit(clamping: Clamping, *callbacks: L.Callback, max_steps: int, val_every: int | None = None):
    """A tiny two-layer induction model trained ``max_steps`` with ``callbacks`` then the clamp, validated every
    ``val_every`` steps (None: at the end of an epoch, 4 steps, which the tests stop before) and once more at the
    end, as train.py does; returns the module."""
    torch.manual_seed(0)
    cfg = compose_config(TINY)
    datamodule = instantiate(cfg.data)
    module = instantiate(cfg.module, vocab=datamodule.vocab.itos)
    trainer = L.Trainer(max_steps=max_steps, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, accelerator="cpu", num_sanity_val_steps=0,
                        callbacks=[*callbacks, clamping], val_check_interval=val_every)
    trainer.fit(module, datamodule=datamodule)
    trainer.validate(module, datamodule=datamodule, verbose=False)
    return module


def clamped_everywhere(passes, head: int) -> bool:
    return bool(passes) and all(bool((after[:, head] == 0).all()) for _, after in passes)


def test_zero_clamp_holds_the_heads_at_zero_in_the_window_and_their_weights_learn_nothing(one_torch_thread):
    recorder = Recorder()
    fit(Clamping([f"layer0/head{CLAMPED}"], "zero", start=2, until=5), recorder, max_steps=8, val_every=2)
    window = range(2, 5)
    for step in range(8):
        passes = recorder.passes["train", step]
        assert clamped_everywhere(passes, CLAMPED) == (step in window), step
        assert not any(bool((after[:, FREE] == 0).all()) for _, after in passes)  # the other head is left alone
        grads = recorder.grads[step]
        assert (grads[CLAMPED] == 0.0) == (step in window), (step, grads)
        assert grads[FREE] > 0
    # Validations after 2 and 4 steps are inside the window, after 6 not, nor the final one (after 8).
    for step, inside in [(2, True), (4, True), (6, False)]:
        assert clamped_everywhere(recorder.passes["val", step], CLAMPED) == inside, step
    assert not clamped_everywhere(recorder.passes["validate", 8], CLAMPED)


def test_mean_clamp_is_each_position_s_mean_over_the_batch_s_real_queries(one_torch_thread):
    recorder = Recorder()
    fit(Clamping([f"layer0/head{CLAMPED}"], "mean", start=0, until=3), recorder, max_steps=3)
    for step in range(3):
        (before, after), = recorder.passes["train", step]
        real = (recorder.inputs["train", step] != PAD_ID).double()  # (B, T)
        assert 0 < real.mean() < 1  # the batch has padding: what the mean leaves out matters
        for t in range(before.shape[2]):
            if real[:, t].sum() == 0:
                assert (after[:, CLAMPED, t] == 0).all()
                continue
            mean = sum(before[b, CLAMPED, t].double() * real[b, t] for b in range(before.shape[0])) / real[:, t].sum()
            torch.testing.assert_close(after[:, CLAMPED, t].double(), mean.expand_as(after[:, CLAMPED, t]),
                                       atol=1e-6, rtol=1e-5)
        torch.testing.assert_close(after[:, FREE], before[:, FREE], atol=0, rtol=0)
        assert recorder.grads[step][CLAMPED] == 0.0 and recorder.grads[step][FREE] > 0


def test_the_final_validation_and_the_other_callbacks_passes_see_the_clamp_while_the_window_is_open(one_torch_thread):
    """Open to the end: the final validation is clamped, and so are the head ablation's passes, whichever callback
    comes first: zeroing a head that the clamp holds at zero changes nothing, to the last bit."""
    recorder, ablation = Recorder(), HeadAblation(["zero"])
    fit(Clamping([f"layer0/head{CLAMPED}"], "zero"), recorder, ablation, max_steps=2)
    assert clamped_everywhere(recorder.passes["validate", 2], CLAMPED)
    assert ablation.final[f"ablation/zero/loss/layer0/head{CLAMPED}"] == 0.0
    assert ablation.final[f"ablation/zero/loss/layer0/head{FREE}"] != 0.0


def test_the_run_records_its_window_in_metrics_json_and_its_config(tmp_path):
    run_dir = tmp_path / "run"
    run_train(run_dir, *TINY, "max_steps=3", "clamp=[layer0/head*,layer1/head0]", "clamp_kind=mean", "clamp_from=1",
              "clamp_until=2", "ablation=[]", *OBSERVERS_OFF)
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["clamp"] == {"heads": ["layer0/head0", "layer0/head1", "layer1/head0"], "kind": "mean", "from": 1,
                                "until": 2}
    config = yaml.safe_load((run_dir / ".hydra" / "config.yaml").read_text())
    assert (config["clamp"], config["clamp_kind"], config["clamp_from"], config["clamp_until"]) == (
        ["layer0/head*", "layer1/head0"], "mean", 1, 2)


def test_a_run_without_a_clamp_records_none_and_changes_nothing(one_torch_thread):
    recorder = Recorder()
    clamping = Clamping([], "zero")
    fit(clamping, recorder, max_steps=2)
    assert clamping.findings() == {}
    assert all(not clamped_everywhere(recorder.passes["train", step], head) for step in range(2) for head in (0, 1))
    for step in range(2):
        (before, after), = recorder.passes["train", step]
        assert torch.equal(before, after)


@pytest.mark.parametrize("kind", ["zero", "mean"])
@pytest.mark.parametrize("variant", sorted(name for name, facts in declared_variants().items() if facts.learned_heads))
def test_every_mixer_with_heads_of_its_own_is_clamped(variant, kind, one_torch_thread):
    """Head 0 of every layer, on every variant whose layers ablation and patching act on: its output is 0, or the
    same for every sequence of a batch without padding (the mean), and the logits change."""
    source = declared_variants(only=variant)[variant].takes_source
    cfg = compose_config([f"model={variant}", "heads=2", "d_model=16", *([] if source else ["mask=causal"])])
    torch.manual_seed(0)
    module = AttentionLitModule(OmegaConf.to_container(cfg.model, resolve=True, enum_to_str=True),
                                ["<pad>", "<unk>", *map(str, range(20))]).eval()
    tokens = torch.randint(2, 22, (3, 8))  # no <pad>
    names = [head_output_name(layer) for layer in patched_layers(module)]
    assert names
    clamping = Clamping(["layer*/head0"], kind)
    clamping.setup(types.SimpleNamespace(global_step=0), module, "validate")
    try:
        with torch.no_grad(), capture(module.model, names=names) as clamped:
            logits = module(tokens)
    finally:
        clamping.release()
    with torch.no_grad(), capture(module.model, names=names) as free:
        unclamped = module(tokens)
    for name in names:
        head = clamped[name][:, 0]
        assert bool((head == 0).all()) if kind == "zero" else torch.allclose(head, head[:1].expand_as(head))
        assert not torch.allclose(free[name][:, 0], free[name][:1, 0].expand_as(free[name][:, 0]))
    assert not torch.equal(logits, unclamped)


def test_the_preset_sweeps_the_release_step_over_two_layer_runs_with_layer_0_clamped():
    with hydra_compose_api(CONFIG_DIR):
        sweep = compose("train", overrides=["experiment=induction_clamp"], return_hydra_config=True)
        jobs = sweep_job_configs(["experiment=induction_clamp", "seed=0"], "train", validate)
    assert len(planned_jobs(sweep_arguments(sweep, []))) == 10
    assert [(job.layers, list(job.clamp), job.clamp_until, job.max_steps, job.task.name) for job in jobs] == [
        (2, ["layer0/head*"], None, 400, "induction"), (2, ["layer0/head*"], 150, 400, "induction")]
