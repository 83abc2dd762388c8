"""Olsson et al.'s instruments on the validation set: the loss at each target index (exact over the whole set),
the in-context score (loss at the last target minus the first: not a function of the mean loss), and their
step x index heatmap in TensorBoard and in compare.py --plot."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from attention_lab.analysis.loss_by_index import LossByIndex, late_minus_early, target_index
from attention_lab.analysis.tags import by_index, index_tag, is_index_tag
from conftest import validated_untrained


def test_the_target_index_counts_real_targets_only():
    # task=induction's layout: 3 words and their repeat, targets only in the repeat; a second row with padding.
    targets = torch.tensor([[0, 0, 0, 6, 7, 0], [0, 0, 5, 4, 0, 0]])
    assert target_index(targets).tolist() == [[-1, -1, -1, 0, 1, -1], [-1, -1, 0, 1, -1, -1]]


def test_the_loss_by_index_is_exact_over_batches_of_different_lengths():
    torch.manual_seed(0)
    metric = LossByIndex(8)
    sums, counts = [0.0] * 8, [0] * 8  # the reference, in plain Python
    for length in (5, 8, 3):
        targets = torch.randint(0, 4, (6, length))  # 0 = <pad>
        token_loss = torch.rand(6, length)
        metric.update(token_loss, targets)
        for row, losses in zip(targets.tolist(), token_loss.tolist(), strict=True):
            rank = 0
            for target, loss in zip(row, losses, strict=True):
                if target != 0:
                    sums[rank] += loss
                    counts[rank] += 1
                    rank += 1
    expected = [s / c if c else math.nan for s, c in zip(sums, counts, strict=True)]
    assert metric.compute().tolist() == pytest.approx(expected, nan_ok=True, rel=1e-6)


def test_the_in_context_score_is_late_minus_early_per_sequence():
    targets = torch.tensor([[0, 0, 0, 6, 7, 9, 0], [0, 0, 5, 4, 0, 0, 0], [0, 3, 0, 0, 0, 0, 0]])
    token_loss = torch.tensor([[0, 0, 0, 2.0, 9.0, 0.5, 0], [0, 0, 1.0, 3.0, 0, 0, 0], [0, 7.0, 0, 0, 0, 0, 0]])
    total, count = late_minus_early(token_loss, targets)
    # (0.5 - 2.0) + (3.0 - 1.0); the third row has one real target: no late and early to compare.
    assert int(count) == 2 and float(total) == pytest.approx(0.5)


def test_the_in_context_score_is_not_a_function_of_the_mean_loss():
    """Two validation sets' per-index loss profiles with the same mean loss (val/loss) and different in-context
    scores: the old score (a constant minus val/loss) could not tell them apart."""
    targets = torch.tensor([[0, 0, 0, 6, 7, 9, 0]] * 2)
    falling = torch.tensor([[0, 0, 0, 3.0, 2.0, 1.0, 0]] * 2)  # later targets easier: in-context learning
    flat = torch.tensor([[0, 0, 0, 2.0, 2.0, 2.0, 0]] * 2)  # every target as hard
    real = targets != 0
    assert float(falling[real].mean()) == float(flat[real].mean()) == 2.0
    scores = [float(total / count) for total, count in (late_minus_early(falling, targets),
                                                        late_minus_early(flat, targets))]
    assert scores == pytest.approx([-2.0, 0.0])


def test_the_index_tags_round_trip():
    assert index_tag(3) == "val/loss_by_index/3" and is_index_tag("val/loss_by_index/3")
    assert not is_index_tag("val/loss") and not is_index_tag("val/loss_by_index/x")
    assert by_index({"val/loss_by_index/0": 1.0, "val/loss_by_index/2": 0.5, "val/loss": 9.0}) == [1.0, None, 0.5]
    assert by_index({"val/loss": 9.0}) == []


def test_the_module_logs_every_index_and_the_score_over_the_whole_validation_set(tmp_path):
    """Logged values against a reference computed here over the whole set in one pass (the validation runs in
    batches of 256: 600 examples are three, so a last-batch value would differ)."""
    torch.set_num_threads(1)
    _, module, datamodule, (metrics,) = validated_untrained(
        ["experiment=induction_formation", "task.train_size=64", "task.val_size=600", "d_model=16", "layers=1",
         "batch_size=16", "seed=0"], tmp_path, seed=0)
    inputs, targets = datamodule.val_set.tensors
    with torch.no_grad():
        token_loss = F.cross_entropy(module(inputs).transpose(1, 2), targets, ignore_index=0, reduction="none")
    index = target_index(targets)
    for i in range(int(index.max()) + 1):
        expected = float(token_loss[index == i].mean())
        assert metrics[f"val/loss_by_index/{i}"] == pytest.approx(expected, rel=1e-5), i
    assert f"val/loss_by_index/{int(index.max()) + 1}" not in metrics
    last = index.max(-1, keepdim=True).values
    late = token_loss[(index == last) & (index >= 0)]
    early = token_loss[index == 0]
    assert metrics["val/in_context_score"] == pytest.approx(float((late - early).mean()), rel=1e-5)


def test_the_heatmap_is_drawn_once_at_the_final_validation(tmp_path):
    from lightning.pytorch.loggers import TensorBoardLogger
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from attention_lab.callbacks.loss_by_index_map import LossByIndexMap

    logger = TensorBoardLogger(save_dir=str(tmp_path), name="", version="")
    callback = LossByIndexMap(run_name="layers=1")

    def validation(step: int, fn: str, values: list[float]) -> None:
        metrics = {index_tag(i): torch.tensor(v) for i, v in enumerate(values)}
        trainer = SimpleNamespace(sanity_checking=False, state=SimpleNamespace(fn=fn), global_step=step,
                                  callback_metrics=metrics, loggers=[logger])
        callback.on_validation_end(trainer, None)

    validation(10, "fit", [2.0, 2.5])
    validation(20, "fit", [1.0, 1.5, 2.0])  # a later validation may see an index the earlier did not
    assert callback.state_dict() == {"steps": [10, 20], "rows": [[2.0, 2.5], [1.0, 1.5, 2.0]]}
    validation(20, "validate", [1.0, 1.5, 2.0])
    logger.experiment.flush()
    events = EventAccumulator(logger.log_dir, size_guidance={"images": 0})
    events.Reload()
    (image,) = events.Images("val/loss_by_index")
    assert image.step == 20 and image.width > 200 and image.height > 200


def test_a_validation_starts_from_empty_sums_whatever_the_module_carries(tmp_path):
    """ddp_spawn hands the trained module to the final validation's new processes with the sums of a validation
    during training (its ranks wrote them into the shared memory of the main process's module): the final metrics
    must not average them in."""
    import lightning as L

    torch.set_num_threads(1)
    _, module, datamodule, (first,) = validated_untrained(
        ["task=copy", "task.train_size=64", "task.val_size=64", "d_model=16", "layers=1", "seed=0"], tmp_path, seed=0)
    with torch.inference_mode():  # as in a validation: its reset left inference tensors
        module.loss_by_index.update(torch.full((1, 3), 100.0), torch.tensor([[5, 6, 7]]))  # an earlier set's sums
    trainer = L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tmp_path, accelerator="cpu")
    (again,) = trainer.validate(module, datamodule=datamodule, verbose=False)
    by_index = {key: value for key, value in first.items() if is_index_tag(key)}
    assert len(by_index) >= 3 and {key: again[key] for key in by_index} == by_index
