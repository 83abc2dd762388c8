"""val/loss and ood/loss are means over every real (non-pad) target token of their set: the sum of the token losses
over the number of real targets, whatever the validation batches are (not a mean of per-batch means, which would
weigh a batch by its sequences). Checked against the same sum written here, over sets whose sequences differ in
length, at two batch sizes that cut the sets differently."""

from __future__ import annotations

import lightning as L
import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

from attention_lab.analysis.validation_metrics import LOSS, OOD, SPLITS, VAL, VALIDATION_METRICS
from attention_lab.data.corpus import PAD_ID
from conftest import validated_untrained

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# Induction sequences of 4..8 words and a longer set of 10..14: batches hold different numbers of real targets.
OVERRIDES = ["task=induction", "mask=causal", "d_model=16", "layers=1", "ablation=[]", "task.train_size=32",
             "task.val_size=37", "task.min_len=4", "task.max_len=8", "task.ood_min_len=10", "task.ood_max_len=14"]


def token_mean(module, dataset) -> float:
    """Σ of the real targets' cross-entropies / their number, over the whole set, summed in float64."""
    total, count = 0.0, 0
    with torch.no_grad():
        for inputs, targets in DataLoader(dataset, batch_size=5):
            logits = module(inputs)
            losses = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=PAD_ID, reduction="none")
            real = targets != PAD_ID
            total += losses[real].double().sum().item()
            count += int(real.sum())
    return total / count


def logged_losses(module, datamodule, batch_size: int, tmp_path) -> dict[str, float]:
    trainer = L.Trainer(logger=False, enable_progress_bar=False, enable_model_summary=False,
                        default_root_dir=tmp_path, accelerator="cpu")
    loaders = [DataLoader(dataset, batch_size=batch_size) for dataset in (datamodule.val_set, datamodule.ood_set)]
    results = trainer.validate(module, dataloaders=loaders, verbose=False)
    return {f"{split}/{LOSS}": result[f"{split}/{LOSS}"] for split, result in zip(SPLITS, results, strict=True)}


def test_the_loss_is_the_mean_over_real_target_tokens_whatever_the_batches(tmp_path):
    _, module, datamodule, _ = validated_untrained(OVERRIDES, tmp_path, seed=0)
    module.eval()
    expected = {f"{VAL}/{LOSS}": token_mean(module, datamodule.val_set),
                f"{OOD}/{LOSS}": token_mean(module, datamodule.ood_set)}
    lengths = [int((targets != PAD_ID).sum()) for _, targets in datamodule.val_set]
    assert len(set(lengths)) > 1  # sequences of different lengths: a mean of batch means would differ
    for batch_size in (4, 37):  # 10 batches, the last of one sequence; one batch of the whole set
        logged = logged_losses(module, datamodule, batch_size, tmp_path)
        assert logged == pytest.approx(expected, abs=1e-6), batch_size


def test_every_loss_like_scalar_is_declared_on_both_sets():
    """The only loss-like scalar is LOSS, on both sets: what the test above checks is all there is to check."""
    names = {metric.name for metric in VALIDATION_METRICS if metric.name.endswith("loss")}
    assert names == {LOSS}
    assert next(m for m in VALIDATION_METRICS if m.name == LOSS).splits == SPLITS
