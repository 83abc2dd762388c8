"""Callbacks that show what attention learns: heatmaps and sample predictions in TensorBoard."""

from __future__ import annotations

import logging

import lightning as L
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only

from attention_lab.data.corpus import UNK, tokenize
from attention_lab.lit_module import AttentionLitModule
from attention_lab.plotting import attention_figure

log = logging.getLogger(__name__)


class AttentionMapLogger(L.Callback):
    """Every ``every_n_steps`` training steps and at the end of training, logs one heatmap per
    layer and head for the probe sentence (tags ``attention/layer{l}/head{h}``) and a few
    validation predictions beside their targets (text ``predictions``)."""

    def __init__(self, probe: str = "Life is short, eat dessert first", every_n_steps: int = 100,
                 num_predictions: int = 4) -> None:
        self.probe_words = tokenize(probe)
        self.every_n_steps = every_n_steps
        self.num_predictions = num_predictions
        self._last_logged_step = -1

    def setup(self, trainer: L.Trainer, pl_module: AttentionLitModule, stage: str) -> None:
        unknown = [w for w in self.probe_words if w not in pl_module.vocab]
        if unknown:
            log.warning("probe words not in the vocabulary are shown as %s: %s", UNK, ", ".join(unknown))
        max_len = pl_module.hparams.context_length
        if len(self.probe_words) > max_len:
            log.warning("probe has %d words; only the first %d (model.context_length) are shown",
                        len(self.probe_words), max_len)
            self.probe_words = self.probe_words[:max_len]

    @staticmethod
    def tensorboard(trainer: L.Trainer):
        for logger in trainer.loggers:
            if isinstance(logger, TensorBoardLogger):
                return logger.experiment
        return None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step % self.every_n_steps == 0:
            self.log_maps(trainer, pl_module)

    def on_train_end(self, trainer, pl_module) -> None:
        self.log_maps(trainer, pl_module)

    @rank_zero_only
    def log_maps(self, trainer: L.Trainer, pl_module: AttentionLitModule) -> None:
        writer = self.tensorboard(trainer)
        step = trainer.global_step
        if writer is None or step == self._last_logged_step:
            return
        self._last_logged_step = step
        words = [w if w in pl_module.vocab else UNK for w in self.probe_words]
        preds, weights = pl_module.predict_words([words])
        query_words = [f"out{i}" for i in range(len(words))] if pl_module.model.encoder_decoder else words
        for layer, layer_weights in enumerate(weights):
            for head, head_weights in enumerate(layer_weights[0].float().cpu().numpy()):
                title = f"layer {layer}, head {head} · step {step}"
                writer.add_figure(f"attention/layer{layer}/head{head}",
                                  attention_figure(head_weights, query_words, words, title), step, close=True)
        self.log_predictions(writer, trainer, pl_module, step)

    def log_predictions(self, writer, trainer: L.Trainer, pl_module: AttentionLitModule, step: int) -> None:
        datamodule = trainer.datamodule
        if datamodule is None or datamodule.val_set is None:
            return
        inputs, targets = datamodule.val_set[: self.num_predictions]
        vocab = pl_module.vocab
        rows = ["| input | target | prediction | ok |", "|---|---|---|---|"]
        samples = [[vocab[i] for i in row if i != 0] for row in inputs.tolist()]
        preds, _ = pl_module.predict_words(samples)
        for sample, target, pred in zip(samples, targets.tolist(), preds):
            target_words = [vocab[i] for i in target if i != 0]
            pred = pred[: len(target_words)]
            rows.append(f"| {' '.join(sample)} | {' '.join(target_words)} | {' '.join(pred)} | "
                        f"{'✓' if pred == target_words else '✗'} |")
        writer.add_text("predictions", "\n".join(rows), step)
