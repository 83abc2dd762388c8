"""LightningModule: trains a SequenceModel on a sentence task and logs its metrics."""

from __future__ import annotations

import math
from collections.abc import Callable

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor
from torchmetrics import MeanMetric, Metric
from torchmetrics.classification import MulticlassAccuracy

from attention_lab.analysis.head_scores import PROBE_KINDS, head_scores
from attention_lab.analysis.loss_by_index import LossByIndex, late_minus_early
from attention_lab.analysis.prefix_matching import repeated_random_words
from attention_lab.analysis.tags import ENTROPY, index_tag, score_name, tag
from attention_lab.analysis.validation_metrics import (
    IN_CONTEXT_SCORE,
    LOSS,
    SEQ_ACC,
    SPLITS,
    TOKEN_ACC,
    VAL,
    measured,
)
from attention_lab.attention.hooks import capture
from attention_lab.config import ModelConfig
from attention_lab.data.corpus import PAD_ID
from attention_lab.model import TrainedModel


def attention_entropy(weights: Tensor, query_mask: Tensor) -> Tensor:
    """Mean entropy (nats) of each head's attention rows over real queries: (B, H, T, T) -> (H,).
    Low entropy = sharp, focused heads; log(T) = uniform attention."""
    row_entropy = -(weights * weights.clamp_min(1e-12).log()).sum(-1)  # (B, H, T)
    mask = query_mask[:, None, :].to(row_entropy.dtype)  # (B, 1, T)
    return (row_entropy * mask).sum((0, 2)) / mask.sum((0, 2)).clamp_min(1)


def progress_bar_shown(trainer: L.Trainer) -> bool:
    """Whether the run draws a progress bar (Rich's and tqdm's say so in ``is_enabled``; the lab's is off where the
    console is not a terminal)."""
    bar = trainer.progress_bar_callback
    return bar is not None and bool(getattr(bar, "is_enabled", True))


class AttentionLitModule(TrainedModel, L.LightningModule):
    """Trains a SequenceModel built from one ModelConfig: a TrainedModel (its forward and predict_words) that
    Lightning trains. The checkpoint's hparams hold that config and the vocabulary as plain types, so a checkpoint
    loads with ``weights_only=True`` and rebuilds the model alone (TrainedModel.from_checkpoint)."""

    def __init__(self, model: ModelConfig | dict, vocab: list[str],
                 optimizer: Callable[..., torch.optim.Optimizer] | None = None, task_name: str = "") -> None:
        super().__init__(model, vocab)
        self.save_hyperparameters({"model": self.config.to_dict(), "vocab": self.vocab})
        self.optimizer = optimizer or torch.optim.AdamW
        # Validation metrics accumulate over the whole validation set (and sync across DDP processes). The losses
        # are means over every real target token of the set, whatever the batches: a MeanMetric of the token losses
        # (self.log of a batch's mean would weigh each batch by its sequences, not by its tokens).
        self.val_loss = MeanMetric()
        self.val_token_acc = MulticlassAccuracy(len(self.vocab), average="micro", ignore_index=PAD_ID)
        self.val_seq_acc = MeanMetric()
        # The second validation set (task.ood_min_len..task.ood_max_len), when the datamodule gives one.
        self.ood_loss = MeanMetric()
        self.ood_token_acc = MulticlassAccuracy(len(self.vocab), average="micro", ignore_index=PAD_ID)
        self.ood_seq_acc = MeanMetric()
        # Olsson et al.'s instruments (attention_lab.analysis.loss_by_index): the loss at each target index of the
        # validation set (val/loss_by_index/<i>) and, in the runs of the task that analysis/validation_metrics.py
        # names for it (induction), loss at the last target of each sequence minus at its first (val/in_context_score).
        self.loss_by_index = LossByIndex(self.config.context_length)
        self.task_name = task_name
        in_context = any(metric.name == IN_CONTEXT_SCORE for metric in measured(VAL, task_name))
        self.in_context = MeanMetric() if in_context else None
        self.prefix_probe = repeated_random_words(self.vocab, self.config.context_length)  # (R, T): words, twice

    def loss(self, batch: tuple[Tensor, Tensor]) -> tuple[Tensor, Tensor]:
        inputs, targets = batch
        logits = self(inputs)
        return F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=PAD_ID), logits

    @staticmethod
    def exact_sequences(preds: Tensor, targets: Tensor) -> Tensor:
        """1.0 for each sequence whose every real (non-pad) token is right, else 0.0: (B,)."""
        return ((preds == targets) | (targets == PAD_ID)).all(dim=1).float()

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        loss, logits = self.loss(batch)
        # Written straight to the loggers for every `trainer.log_every_n_steps`-th step (steps n-1, 2n-1, ...): a
        # `self.log` call moves its whole result object to the device, a fair share of a small model's step
        # (docs/benchmarks.md, "Per-step overhead"), so the other steps skip the metrics altogether.
        if (self.global_step + 1) % self.trainer.log_every_n_steps == 0:
            targets, preds = batch[1], logits.argmax(-1)
            real = targets != PAD_ID
            metrics = {"train/loss": loss.detach(), "train/token_acc": ((preds == targets) & real).sum() / real.sum(),
                       "train/seq_acc": self.exact_sequences(preds, targets).mean()}
            metrics = {key: float(value) for key, value in metrics.items()}
            for logger in self.loggers:
                logger.log_metrics(metrics, step=self.global_step)
            if progress_bar_shown(self.trainer):  # no bar (a file, a pipe, a sweep job): nothing to hand it
                self.log_dict({"loss": metrics["train/loss"], "acc": metrics["train/seq_acc"]}, prog_bar=True,
                              logger=False)
        return loss

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int, dataloader_idx: int = 0) -> None:
        # Weights only for the first batch of the validation set: enough for the entropy curves and head scores,
        # fast path otherwise. Dataloader 1 is the longer, out-of-distribution set: ood/* metrics only.
        first = batch_idx == 0 and dataloader_idx == 0
        with capture(self.model, points=("weights",) if first else ()) as cache:
            logits = self(batch[0])
        inputs, targets = batch
        preds = logits.argmax(-1)
        loss, token_acc, seq_acc = ((self.val_loss, self.val_token_acc, self.val_seq_acc) if dataloader_idx == 0
                                    else (self.ood_loss, self.ood_token_acc, self.ood_seq_acc))
        token_loss = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=PAD_ID, reduction="none")  # (B, T)
        loss.update(token_loss[targets != PAD_ID])  # one value per real target: the set's mean over its tokens
        token_acc(preds, targets)
        seq_acc(self.exact_sequences(preds, targets))
        values: dict[str, Tensor | Metric] = {LOSS: loss, TOKEN_ACC: token_acc, SEQ_ACC: seq_acc}
        if dataloader_idx == 0:
            self.loss_by_index.update(token_loss, targets)
            if self.in_context is not None:
                total, count = late_minus_early(token_loss, targets)
                self.in_context.update(total / count.clamp_min(1), weight=count)
                values[IN_CONTEXT_SCORE] = self.in_context
        self.log_validation(SPLITS[dataloader_idx], values)
        if first:
            self.log_attention_measures(inputs, cache.layers("weights"))

    def log_validation(self, split: str, values: dict[str, Tensor | Metric]) -> None:
        """Logs the scalars that analysis/validation_metrics.py declares for ``split`` and this run's task, each
        from ``values`` (by name), and nothing else: what the config checks accept as ``optimized_metric`` is what
        is logged. A declared scalar without a value is an error of this module, raised at the first validation."""
        for metric in measured(split, self.task_name):
            if metric.name not in values:
                raise KeyError(f"{metric.tag(split)} is declared in analysis/validation_metrics.py, but "
                               "validation_step gives it no value")
            value = values[metric.name]
            # A plain tensor would be averaged over DDP processes (sync_dist; a no-op in one process); the
            # torchmetrics objects sync themselves. Plain names for both sets: "ood/loss", not
            # "ood/loss/dataloader_idx_1".
            self.log(metric.tag(split), value, on_epoch=True, prog_bar=metric.progress_bar and split == VAL,
                     sync_dist=not isinstance(value, Metric), add_dataloader_idx=False)

    def on_validation_epoch_start(self) -> None:
        # Empty sums at the start, not after the end: a module handed to new processes can arrive with an earlier
        # validation's sums (ddp_spawn pickles its states into shared memory, which the ranks then write).
        # Lightning resets the metrics given to self.log; this one is logged as numbers.
        self.loss_by_index.reset()

    def on_validation_epoch_end(self) -> None:
        """val/loss_by_index/<i> for every target index the validation set has (summed over the whole set)."""
        for index, value in enumerate(self.loss_by_index.compute().tolist()):
            if not math.isnan(value):  # NaN: no target had this index
                self.log(index_tag(index), value, add_dataloader_idx=False)

    def log_attention_measures(self, inputs: Tensor, weights: list[Tensor]) -> None:
        """Entropy of every head and, for models whose queries are the input's positions, its head scores: on the
        batch, and prefix matching on the repeated random probe."""
        real = inputs != PAD_ID
        probe_weights = [] if self.model.encoder_decoder else self.probe_weights()
        for layer, w in enumerate(weights):
            for head, value in enumerate(attention_entropy(w, real)):
                self.log(tag(ENTROPY, layer, head), value, on_epoch=True, sync_dist=True,
                         add_dataloader_idx=False)
            if self.model.encoder_decoder:  # rows are output slots, not input positions: no pattern applies
                continue
            scores = {**head_scores(w, inputs, real),
                      **head_scores(probe_weights[layer], self.prefix_probe, self.prefix_probe != PAD_ID, PROBE_KINDS)}
            for kind, values in scores.items():
                for head, value in enumerate(values):
                    self.log(score_name(kind, layer, head), value, on_epoch=True, sync_dist=True,
                             add_dataloader_idx=False)

    def probe_weights(self) -> list[Tensor]:
        """Every layer's attention on the repeated random probe (attention_lab.analysis.prefix_matching): (R, H, T, T)."""
        self.prefix_probe = self.prefix_probe.to(self.device)
        with capture(self.model, points=("weights",)) as cache:
            self(self.prefix_probe)
        return cache.layers("weights")

    def configure_optimizers(self):
        return self.optimizer(self.parameters())
