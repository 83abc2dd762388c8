"""The probe's attention as data for TensorBoard's attention tab: every layer and head, every logged step (densely
early on: :mod:`~attention_lab.callbacks.log_schedule`), as one tensor summary per step (see :mod:`attention_lab.records.probe_summary`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import lightning as L
import numpy as np
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from tensorboard.compat.proto import event_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

from attention_lab.callbacks.log_schedule import is_logged
from attention_lab.data.corpus import tokenize
from attention_lab.data.probe import probe_axes, with_first_token
from attention_lab.records.probe_summary import WordLayout, probe_summary

if TYPE_CHECKING:
    from attention_lab.lit_module import AttentionLitModule


class AttentionSummaryLogger(L.Callback):
    """At the steps of :mod:`~attention_lab.callbacks.log_schedule` (``every_n_steps`` its first interval) and at
    the end of training, writes the probe's weights of every
    layer and head (tag ``attention_lab/probe``) into an event file of its own in the run's TensorBoard dir
    (TensorBoard reads every event file of a run dir; the writer is TensorBoard's public EventFileWriter, so no
    internals of the logger's SummaryWriter are touched). Nothing without a TensorBoard logger, or for a model
    without attention weights."""

    def __init__(self, probe: str = "Life is short, eat dessert first", every_n_steps: int = 100) -> None:
        self.probe_words = tokenize(probe)
        self.every_n_steps = every_n_steps
        self.last_logged_step = -1
        self.writer: EventFileWriter | None = None

    def setup(self, trainer: L.Trainer, pl_module: AttentionLitModule, stage: str) -> None:
        # The map logger warns about unknown and surplus words; the words here are the same ones.
        self.probe_words = with_first_token(self.probe_words, pl_module.vocab)[: pl_module.config.context_length]

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        if is_logged(trainer.global_step, self.every_n_steps):
            self.log_probe(trainer, pl_module)

    def on_train_end(self, trainer, pl_module) -> None:
        self.log_probe(trainer, pl_module)
        self.close()

    def on_exception(self, trainer, pl_module, exception) -> None:
        self.close()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    @rank_zero_only
    def log_probe(self, trainer: L.Trainer, pl_module: AttentionLitModule) -> None:
        log_dir = next((logger.log_dir for logger in trainer.loggers if isinstance(logger, TensorBoardLogger)), None)
        step = trainer.global_step
        if log_dir is None or step == self.last_logged_step or not self.probe_words:
            return
        self.last_logged_step = step
        query_words, words = probe_axes(self.probe_words, pl_module.vocab, pl_module.model.encoder_decoder)
        # The weights come from the path the map logger and visualize.py use (the module's predict_words).
        _, weights = pl_module.predict_words([words])
        if not weights:
            return
        layout = WordLayout(query_words, words, "output position" if pl_module.model.encoder_decoder else "query",
                            tuple(block.attention.kind for block in pl_module.model.blocks))
        stacked = np.stack([w[0].detach().float().cpu().numpy() for w in weights])  # (layers, heads, Tq, Tk)
        if self.writer is None:
            self.writer = EventFileWriter(log_dir, filename_suffix=".attention")
        self.writer.add_event(event_pb2.Event(wall_time=time.time(), step=step,
                                              summary=probe_summary(stacked, layout)))
        self.writer.flush()  # the tab shows a step as soon as it is logged
