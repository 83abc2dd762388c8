"""The probe sentence's attention in TensorBoard, and when it is logged: every layer and head as data for the
attention tab at every logged step and as PNG heatmaps, with a few sample predictions.

The schedule: densely while the heads form, sparser as training goes on, so that the tab's slider can show a
mechanism forming in the first hundred steps and a long run still writes few records. ``every_n_steps``
(``log_attention_every_n_steps``) is the first interval: every ``n`` steps up to step ``20 n``, then the interval
doubles each time the step doubles (10 records per doubling). With n = 10: steps 10, 20, ..., 190, then 200, 220,
..., 380, then 400, 440, ... At the end of training everything is logged once more.

The predictions (text) keep one record per doubling, at steps 10 n, 20 n, 40 n, ...: a text tag's steps beyond
TensorBoard's default reservoir of 10 would be dropped at random, and each record costs a forward pass."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING

import lightning as L
import numpy as np
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from tensorboard.compat.proto import event_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from torch.utils.tensorboard.summary import image, text

from attention_lab.data.corpus import PAD_ID, UNK, tokenize
from attention_lab.data.probe import probe_axes, with_first_token
from attention_lab.plotting.colour_scale import UNIT_SCALE, ColourScale, colour_scale
from attention_lab.plotting.heatmaps import HeatmapFigure, run_title
from attention_lab.records.probe_summary import WordLayout, probe_summary

if TYPE_CHECKING:
    from attention_lab.lit_module import AttentionLitModule

log = logging.getLogger(__name__)

DENSE = 20  # intervals of every_n_steps before the first doubling


def interval_at(step: int, every_n_steps: int) -> int:
    """The logging interval in force at ``step``: ``every_n_steps`` times 2^k, k = log2(step / (DENSE/2 n)) rounded
    down (0 before step ``DENSE n``)."""
    return every_n_steps << max(0, (step // (DENSE // 2 * every_n_steps)).bit_length() - 1)


def is_logged(step: int, every_n_steps: int) -> bool:
    """Whether training step ``step`` (a global step, from 1) logs the probe's attention."""
    return step > 0 and step % interval_at(step, every_n_steps) == 0


def is_doubling(step: int, every_n_steps: int) -> bool:
    """Whether ``step`` is one where the interval doubles: ``DENSE/2 n`` times a power of two (100, 200, 400, ...
    with n = 10)."""
    first = DENSE // 2 * every_n_steps
    return step > 0 and step % first == 0 and (step // first).bit_count() == 1


def logged_steps(max_steps: int, every_n_steps: int) -> list[int]:
    """The steps 1..``max_steps`` that log, in order (the end of training logs as well, once more if it is not
    among them)."""
    return [step for step in range(1, max_steps + 1) if is_logged(step, every_n_steps)]


def tensorboard_dir(trainer: L.Trainer) -> str | None:
    """The run's TensorBoard dir, or None without a TensorBoard logger."""
    return next((logger.log_dir for logger in trainer.loggers if isinstance(logger, TensorBoardLogger)), None)


class ProbeLogger(L.Callback):
    """The probe's attention in TensorBoard; nothing without a TensorBoard logger.

    - The attention tab's data: at the steps of :func:`is_logged` and at the end of training, the probe's weights of
      every layer and head (tag ``attention_lab/probe``, see :mod:`attention_lab.records.probe_summary`), into an
      event file of its own (``.attention``) in the run's TensorBoard dir. TensorBoard reads every event file of a
      run dir; the writer is TensorBoard's public EventFileWriter, so no internals of the logger's SummaryWriter
      are touched. Nothing for a model without attention weights.
    - Unless ``images`` is false: once per doubling of the step (:func:`is_doubling`) and at the end of training, a
      few validation predictions beside their targets (text ``predictions``); at the end of training, and every
      ``image_every_n_steps`` if given, one heatmap per layer and head (tags ``attention/layer{l}/head{h}``).

    The images are of the final model by default: the attention tab shows every logged step from the tensors at a
    fraction of the cost, while drawing and PNG-encoding a heatmap per head holds the interpreter lock many times
    longer than a training step of the default model. The weights and predictions are computed on the training
    thread; drawing and encoding the images happen on one worker thread while training goes on; the final
    validation (train.py's, after fit) waits for it at its end. Without one (a fit alone, or a run stopped by a
    signal), the worker finishes on its own before the process exits; ``wait`` waits for it. The worker writes into
    an event file of its own (``.maps``), as TensorBoard's public EventFileWriter: Lightning closes the logger's
    writer at the end of fit, while the final images may still be drawing."""

    def __init__(self, probe: str = "Life is short, eat dessert first", every_n_steps: int = 100,
                 num_predictions: int = 4, run_name: str = "", image_every_n_steps: int | None = None,
                 images: bool = True) -> None:
        self.probe_words = tokenize(probe)
        self.run_name = run_name  # in every title: which config a map belongs to
        self.every_n_steps = every_n_steps
        self.images = images
        self.image_every_n_steps = image_every_n_steps
        self.num_predictions = num_predictions
        self.last_logged_step, self.last_images = -1, False  # of the predictions and images
        self.last_tensors_step = -1
        self.tensors: EventFileWriter | None = None  # the tab's records, written on the training thread
        self.figures: dict[tuple[tuple[str, ...], tuple[str, ...]], HeatmapFigure] = {}  # used by the worker only
        self.worker: ThreadPoolExecutor | None = None
        self.pending: list[Future] = []
        self.events: EventFileWriter | None = None  # written by the worker only

    def setup(self, trainer: L.Trainer, pl_module: AttentionLitModule, stage: str) -> None:
        self.probe_words = with_first_token(self.probe_words, pl_module.vocab)
        unknown = [w for w in self.probe_words if w not in pl_module.vocab]
        if unknown:
            log.warning("probe words not in the vocabulary are shown as %s: %s", UNK, ", ".join(unknown))
        max_len = pl_module.config.context_length
        if len(self.probe_words) > max_len:
            log.warning("probe has %d words; only the first %d (model.context_length) are shown",
                        len(self.probe_words), max_len)
            self.probe_words = self.probe_words[:max_len]

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        images = self.image_every_n_steps is not None and step % self.image_every_n_steps == 0
        if self.images and (images or is_doubling(step, self.every_n_steps)):
            self.log_maps(trainer, pl_module, images=images)
        if is_logged(step, self.every_n_steps):
            self.log_tensors(trainer, pl_module)

    def on_train_end(self, trainer, pl_module) -> None:
        # The final model's images are drawn on the worker while the run goes on to its final validation, whose
        # end waits for them: the drawing overlaps the validation and head-ablation passes instead of adding to them.
        if self.images:
            self.log_maps(trainer, pl_module, images=True)
        self.log_tensors(trainer, pl_module)
        self.close_tensors()

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.state.fn == "validate":
            self.wait()

    def on_exception(self, trainer, pl_module, exception: BaseException) -> None:
        self.wait(raise_errors=False)
        self.close_tensors()

    def teardown(self, trainer, pl_module, stage: str) -> None:
        if stage == "fit":  # the final images may still be drawing: the final validation waits for them
            return
        self.wait(raise_errors=False)
        if self.worker is not None:
            self.worker.shutdown(wait=True)
            self.worker = None
        if self.events is not None:
            self.events.close()
            self.events = None

    def wait(self, raise_errors: bool = True) -> None:
        """Until every submitted image is written; a drawing error surfaces here."""
        pending, self.pending = self.pending, []
        for future in pending:
            error = future.exception()
            if error is not None and raise_errors:
                raise error
            if error is not None:
                log.warning("an attention map could not be written: %s", error)

    def close_tensors(self) -> None:
        if self.tensors is not None:
            self.tensors.close()
            self.tensors = None

    # ------------------------------------------------------------------------------------- the attention tab's data

    @rank_zero_only
    def log_tensors(self, trainer: L.Trainer, pl_module: AttentionLitModule) -> None:
        """The probe's weights of this step as one tensor summary; a step is logged once."""
        log_dir = tensorboard_dir(trainer)
        step = trainer.global_step
        if log_dir is None or step == self.last_tensors_step or not self.probe_words:
            return
        self.last_tensors_step = step
        query_words, words = probe_axes(self.probe_words, pl_module.vocab, pl_module.model.encoder_decoder)
        # The weights come from the path the heatmaps and visualize.py use (the module's predict_words).
        _, weights = pl_module.predict_words([words])
        if not weights:
            return
        layout = WordLayout(query_words, words, "output position" if pl_module.model.encoder_decoder else "query",
                            tuple(block.attention.kind for block in pl_module.model.blocks))
        stacked = np.stack([w[0].detach().float().cpu().numpy() for w in weights])  # (layers, heads, Tq, Tk)
        if self.tensors is None:
            self.tensors = EventFileWriter(log_dir, filename_suffix=".attention")
        self.tensors.add_event(event_pb2.Event(wall_time=time.time(), step=step,
                                               summary=probe_summary(stacked, layout)))
        self.tensors.flush()  # the tab shows a step as soon as it is logged

    # ------------------------------------------------------------------------------- the heatmaps and predictions

    @rank_zero_only
    def log_maps(self, trainer: L.Trainer, pl_module: AttentionLitModule, images: bool = True) -> None:
        """The predictions of this step, and its heatmaps if ``images``; a step is logged once, and the images
        of a step whose predictions were logged without them are drawn when they are asked for."""
        log_dir = tensorboard_dir(trainer)
        step = trainer.global_step
        if log_dir is None or (step, images) <= (self.last_logged_step, self.last_images):
            return
        predictions_done = step == self.last_logged_step
        self.last_logged_step, self.last_images = step, images
        query_words, words = probe_axes(self.probe_words, pl_module.vocab, pl_module.model.encoder_decoder)
        maps = self.heatmaps(pl_module, words, step) if images else []
        scale = colour_scale([block.attention.kind for block in pl_module.model.blocks],
                             max((float(np.abs(w).max()) for _, _, w in maps if w.size), default=0.0))
        predictions = None if predictions_done else self.predictions_table(trainer, pl_module)
        if self.worker is None:
            self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="attention-maps")
        self.pending = [f for f in self.pending if not f.done() or f.exception() is not None]
        self.pending.append(self.worker.submit(self.write, log_dir, maps, query_words, words, predictions, step,
                                               scale))

    def heatmaps(self, pl_module: AttentionLitModule, words: list[str], step: int) -> list[tuple[str, str, np.ndarray]]:
        """(tag, title, weights) of every layer and head for the probe's ``words``."""
        _, weights = pl_module.predict_words([words])
        mixers = pl_module.config.mixers  # a hybrid stack's titles name each layer's variant
        return [(f"attention/layer{layer}/head{head}",
                 run_title(self.run_name, f"layer {layer}{f' ({mixers[layer]})' if mixers else ''}, head {head} "
                                          f"· step {step}"), head_weights)
                for layer, layer_weights in enumerate(weights)
                for head, head_weights in enumerate(layer_weights[0].float().cpu().numpy())]

    def write(self, log_dir: str, maps: list[tuple[str, str, np.ndarray]], query_words: Sequence[str],
              key_words: Sequence[str], predictions: str | None, step: int, scale: ColourScale = UNIT_SCALE) -> None:
        if self.events is None:
            self.events = EventFileWriter(log_dir, filename_suffix=".maps")
        summaries = self.write_maps(maps, query_words, key_words, scale)
        if predictions is not None:
            summaries.append(text("predictions", predictions))
        for summary in summaries:
            self.events.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))
        self.events.flush()  # on disk now: a run that ends without a final validation never closes the file

    def write_maps(self, maps: list[tuple[str, str, np.ndarray]], query_words: Sequence[str],
                   key_words: Sequence[str], scale: ColourScale = UNIT_SCALE) -> list:
        """(tag, title, weights) heatmaps as TensorBoard image summaries, coloured on ``scale``."""
        layout = (tuple(query_words), tuple(key_words))
        summaries = []
        for tag, title, weights in maps:
            figure = self.figures.get(layout)
            # another scale (a signed map's bound moves with its weights), or a longer title than it has room for
            if figure is None or figure.scale != scale or not figure.fits(title):
                figure = self.figures[layout] = HeatmapFigure(query_words, key_words, title, scale)
            summaries.append(image(tag, figure.render(weights, title), dataformats="HWC"))
        return summaries

    def predictions_table(self, trainer: L.Trainer, pl_module: AttentionLitModule) -> str | None:
        """A few validation examples beside the model's predictions, as a Markdown table."""
        datamodule = trainer.datamodule
        if datamodule is None or datamodule.val_set is None:
            return None
        inputs, targets = datamodule.val_set[: self.num_predictions]
        vocab = pl_module.vocab
        rows = ["| input | target | prediction | ok |", "|---|---|---|---|"]
        samples = [[vocab[i] for i in row if i != PAD_ID] for row in inputs.tolist()]
        preds, _ = pl_module.predict_words(samples)
        for sample, target, pred in zip(samples, targets.tolist(), preds, strict=True):
            target_words = [vocab[i] for i in target if i != PAD_ID]
            pred = pred[: len(target_words)]
            rows.append(f"| {' '.join(sample)} | {' '.join(target_words)} | {' '.join(pred)} | "
                        f"{'✓' if pred == target_words else '✗'} |")
        return "\n".join(rows)
