"""Activation patching: each task's corruption, the patching invariants, and what it finds on a trained induction
model."""

from __future__ import annotations

import logging
import math

import pytest
import torch
from hydra.utils import instantiate

from attention_lab.analysis.ablation import head_output_name
from attention_lab.analysis.patching import corrupt_batch, patch_heads, restored
from attention_lab.analysis.tags import ATTRIBUTION, PATCHING, tag
from attention_lab.attention.functional import AttentionOutput
from attention_lab.attention.hooks import capture, intervene, replace_heads
from attention_lab.callbacks.activation_patching import ActivationPatching
from attention_lab.checks import validate
from attention_lab.data.corpus import BOS_ID, PAD_ID
from attention_lab.data.tasks import TASK_REGISTRY, build_task
from attention_lab.errors import ConfigError
from conftest import compose_config


def validation_rows(*overrides: str) -> tuple[torch.Tensor, torch.Tensor]:
    datamodule = instantiate(compose_config(list(overrides)).data)
    datamodule.setup("fit")
    return datamodule.val_set.tensors


def real(row: list[int], bos: bool) -> list[int]:
    """The example in a padded row: no <bos>, no trailing <pad>."""
    row = row[1:] if bos else row
    while row and row[-1] == PAD_ID:
        row = row[:-1]
    return row


def test_the_tasks_with_a_corruption_are_those_the_docs_name():
    assert sorted(name for name, cls in TASK_REGISTRY.items() if cls.has_corruption()) == ["induction", "mqar", "recall"]


@pytest.mark.parametrize("bos", [False, True])
def test_induction_reverses_the_first_copy_and_nothing_else(bos):
    inputs, targets = validation_rows("task=induction", "task.val_size=50", f"task.bos={str(bos).lower()}")
    clean, corrupted, _, implied, mask = corrupt_batch(build_task("induction"), (inputs, targets), bos)
    for row, bad, want, other, counted in zip(clean.tolist(), corrupted.tolist(), targets.tolist(),
                                              implied.tolist(), mask.tolist(), strict=True):
        words, changed = real(row, bos), real(bad, bos)
        k = len(words) // 2
        assert changed == words[:k][::-1] + words[k:]
        if bos:
            assert bad[0] == row[0] == BOS_ID  # the <bos> stays where it was
        # The reference: the word after the current word's first occurrence in the corrupted input.
        for t, target in enumerate(want):
            if target == PAD_ID:
                assert other[t] == PAD_ID and not counted[t]
                continue
            first = bad.index(bad[t])
            assert first < t and other[t] == bad[first + 1] != target and counted[t]


@pytest.mark.parametrize("name", ["recall", "mqar"])
def test_recall_and_mqar_pass_each_value_to_the_next_key(name):
    inputs, targets = validation_rows(f"task={name}", "task.val_size=50")
    _, corrupted, _, implied, mask = corrupt_batch(build_task(name), (inputs, targets))
    for row, bad, want, other, counted in zip(inputs.tolist(), corrupted.tolist(), targets.tolist(),
                                              implied.tolist(), mask.tolist(), strict=True):
        first_query = next(t for t, target in enumerate(want) if target != PAD_ID)
        pairs = sum(t != PAD_ID for t in want) if name == "mqar" else first_query // 2
        keys, values = row[0:2 * pairs:2], row[1:2 * pairs:2]
        assert bad[0:2 * pairs:2] == keys and bad[2 * pairs:] == row[2 * pairs:]  # keys and queries kept
        assert bad[1:2 * pairs:2] == values[1:] + values[:1]
        for t, target in enumerate(want):
            if target != PAD_ID:  # a query: its key's value in the corrupted input (a value may equal a key)
                assert other[t] == bad[2 * keys.index(row[t]) + 1] and counted[t] == (other[t] != target)
            else:
                assert other[t] == PAD_ID and not counted[t]


def small_model(*overrides: str):
    torch.manual_seed(0)
    cfg = compose_config(["task=induction", "mask=causal", *overrides])
    datamodule = instantiate(cfg.data)
    datamodule.setup("fit")
    module = instantiate(cfg.module, vocab=datamodule.vocab.itos).eval()
    inputs, targets = datamodule.val_set.tensors
    return module, (inputs[:32], targets[:32])


def test_patching_a_head_from_the_same_input_leaves_the_logits_bit_identical():
    """The invariant: a head's output captured on an input and patched into a run on that same input is the
    tensor that run computes there, so every logit is unchanged, exactly (not restored 1: on the clean input the
    clean - corrupted difference is 0)."""
    module, (inputs, _) = small_model()
    names = [head_output_name(layer) for layer in range(len(module.model.blocks))]
    with torch.no_grad():
        with capture(module.model, names=names) as cache:
            plain = module(inputs)
        for name in names:
            for heads in [[0], [2], list(range(module.config.num_heads))]:
                with intervene(module.model, {name: replace_heads(cache[name], heads)}):
                    assert torch.equal(module(inputs), plain)


def test_patching_every_head_of_a_layer_is_patching_the_layer():
    """The reference: the attention module's whole output (after out_proj) replaced by the clean run's, with a
    plain PyTorch forward hook, not the lab's hook points."""
    module, batch = small_model()
    task = build_task("induction")
    clean, corrupted, targets, implied, mask = corrupt_batch(task, batch)
    layer = 1
    attention = module.model.blocks[layer].attention
    name = head_output_name(layer)
    with torch.no_grad():
        outputs = {}

        def keep(module, args, kwargs, out):
            outputs["clean"] = out.context  # returns None: the output stays as it is

        handle = attention.register_forward_hook(keep, with_kwargs=True)
        with capture(module.model, names=[name]) as cache:
            module(clean)
        handle.remove()
        handle = attention.register_forward_hook(
            lambda m, args, kwargs, out: AttentionOutput(outputs["clean"], out.weights), with_kwargs=True)
        reference = module(corrupted)
        handle.remove()
        with intervene(module.model, {name: replace_heads(cache[name], range(attention.num_heads))}):
            patched = module(corrupted)
    assert not torch.allclose(patched, module(corrupted))  # the patch changes something
    torch.testing.assert_close(patched, reference, rtol=1e-5, atol=1e-5)


def logit_diff(logits, targets, implied, mask) -> float:
    """Mean over the counted positions of logit(correct) - logit(implied), position by position."""
    diffs = [float(logits[b, t, targets[b, t]] - logits[b, t, implied[b, t]])
             for b, t in mask.nonzero().tolist()]
    return sum(diffs) / len(diffs)


@pytest.fixture(scope="module")
def induction(trained_induction):
    torch.set_num_threads(1)
    module, batches = trained_induction
    return module, batches, patch_heads(module, batches, build_task("induction"))


def test_patching_a_whole_layer_restores_more_than_any_of_its_heads(induction):
    module, _, results = induction
    heads = module.config.num_heads
    assert set(results) == {tag(PATCHING, layer, head) for layer in range(2) for head in [*range(heads), None]}
    for layer in range(2):
        assert results[tag(PATCHING, layer, None)] > max(results[tag(PATCHING, layer, h)] for h in range(heads))
    # The induction heads of layer 1 carry the copied word: patching all of them restores most of the difference.
    assert results[tag(PATCHING, 1, None)] > 0.5


def test_the_fraction_restored_by_hand(induction):
    """Layer 1, head 0, recomputed: clean, corrupted and patched logit differences over the whole validation set."""
    module, batches, results = induction
    task, name = build_task("induction"), head_output_name(1)
    sums = {"clean": [], "corrupted": [], "patched": []}
    with torch.no_grad():
        for batch in batches:
            clean, corrupted, targets, implied, mask = corrupt_batch(task, batch)
            with capture(module.model, names=[name]) as cache:
                sums["clean"].append(logit_diff(module(clean), targets, implied, mask) * int(mask.sum()))
            sums["corrupted"].append(logit_diff(module(corrupted), targets, implied, mask) * int(mask.sum()))
            with intervene(module.model, {name: replace_heads(cache[name], [0])}):
                sums["patched"].append(logit_diff(module(corrupted), targets, implied, mask) * int(mask.sum()))
    clean, corrupted, patched = (sum(v) for v in sums.values())
    assert clean > corrupted
    assert results[tag(PATCHING, 1, 0)] == pytest.approx((patched - corrupted) / (clean - corrupted), rel=1e-6)


def test_a_task_without_a_corruption_is_not_patched_and_says_so_once(caplog):
    module, _ = small_model()
    callback = ActivationPatching({"name": "reverse"})
    with caplog.at_level(logging.INFO):
        assert not callback.active(module) and not callback.active(module)
    notes = [r.getMessage() for r in caplog.records if "activation patching" in r.getMessage()]
    assert notes == ["activation patching: not measured, task=reverse has no corruption to patch from"]
    assert ActivationPatching({"name": "induction"}).active(module)
    assert not ActivationPatching({"name": "induction"}, enabled=False).active(module)


def test_attribution_leaves_the_task_line_to_the_patching_but_names_a_model_it_cannot_measure(caplog):
    """One line for both on the default run's console (task=reverse); a model without heads of their own: its own."""
    from attention_lab.callbacks.attribution import AttributionPatching

    module, _ = small_model()
    headless, _ = small_model("model=simple", "heads=1")
    with caplog.at_level(logging.INFO):
        assert not AttributionPatching({"name": "reverse"}).active(module)
        assert not AttributionPatching({"name": "induction"}).active(headless)
    notes = [r.getMessage() for r in caplog.records if "attribution patching" in r.getMessage()]
    assert notes == ["attribution patching: not measured, the simple variant has no heads with weights of their own"]


def test_the_patching_knobs_are_checked():
    with pytest.raises(ConfigError, match="patching_every_validation=true is invalid with patching=false"):
        validate(compose_config(["patching=false", "patching_every_validation=true"]))
    validate(compose_config(["task=induction", "mask=causal", f"optimized_metric={tag(PATCHING, 1, None)}"]))
    for refused in (["task=reverse"], ["task=induction", "mask=causal", "patching=false"]):
        with pytest.raises(ConfigError, match="optimized_metric=patching/logit_diff/layer1/all is invalid"):
            validate(compose_config([*refused, f"optimized_metric={tag(PATCHING, 1, None)}"]))


def test_an_attribution_metric_is_taken_only_where_attribution_runs():
    metric = f"optimized_metric={tag(ATTRIBUTION, 1, 0)}"
    validate(compose_config(["task=induction", "mask=causal", metric]))
    for refused in (["task=reverse"], ["task=induction", "mask=causal", "attribution=false"]):
        with pytest.raises(ConfigError, match="optimized_metric=attribution/logit_diff/layer1/head0 is invalid"):
            validate(compose_config([*refused, metric]))


def test_nan_where_the_corruption_changes_nothing():
    assert math.isnan(restored(1.0, 2.0, 2.0)) and restored(1.5, 2.0, 1.0) == 0.5


@pytest.mark.parametrize("every_validation", [False, True])
def test_the_callback_patches_at_the_final_validation_and_with_the_knob_at_every_one(every_validation):
    import lightning as L

    cfg = compose_config(["task=induction", "mask=causal", "task.train_size=256", "task.val_size=32"])
    torch.manual_seed(0)
    datamodule = instantiate(cfg.data)
    module = instantiate(cfg.module, vocab=datamodule.vocab.itos)
    callback = ActivationPatching(cfg.task, every_validation=every_validation)
    trainer = L.Trainer(max_steps=4, val_check_interval=2, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                        num_sanity_val_steps=0, callbacks=[callback])
    trainer.fit(module, datamodule=datamodule)
    during_fit = {name for name in trainer.callback_metrics if name.startswith("patching/")}
    assert bool(during_fit) == every_validation and callback.findings() == {}
    trainer.validate(module, datamodule=datamodule)
    final = callback.findings()
    assert set(final) == {tag(PATCHING, layer, head) for layer in range(2) for head in [*range(4), None]}
    assert final == pytest.approx(patch_heads(module, list(datamodule.val_dataloader()), build_task("induction")))
