"""Instantiate -> fit -> measure the final metrics once more. The config was checked before this runs
(:mod:`attention_lab.run.preflight`) and failures are handled around it (:mod:`attention_lab.run.task`), which
hands ``train()`` what the run decided in a :class:`RunContext`: nothing here imports from ``run/``."""

from __future__ import annotations

import contextlib
import copy
import functools
import inspect
import logging
import math
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import hydra
import lightning as L
import torch
from lightning.fabric.utilities.warnings import PossibleUserWarning
from lightning.pytorch.callbacks import ProgressBar
from lightning.pytorch.loggers import TensorBoardLogger
from omegaconf import DictConfig, OmegaConf, read_write

from attention_lab import startup_gc
from attention_lab.analysis.formation_rule import unformed
from attention_lab.analysis.layer_memory import memory_line
from attention_lab.analysis.tags import is_index_tag
from attention_lab.callbacks.findings import Findings
from attention_lab.callbacks.lifecycle import GracefulStop, LastCheckpoint, RngState, RunEndNote, StopOnNonFiniteLoss
from attention_lab.callbacks.steps_to_solve import StepsToSolve
from attention_lab.data.probe import example_text
from attention_lab.errors import TrainingInterrupted
from attention_lab.records.checkpoints import AtomicCheckpointIO, last_checkpoint_path, resume_checkpoint
from attention_lab.records.files import METRICS
from attention_lab.records.hparams_table import hparams_for_dashboard, hparams_table, write_table
from attention_lab.records.metrics_file import write_metrics
from attention_lab.records.run_names import NO_OVERRIDES
from attention_lab.records.writes import check_writes

if TYPE_CHECKING:  # the type only: train() is handed the object, and imports nothing from run/
    from attention_lab.callbacks.signals import StopSignals

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RunContext:
    """What the run decided beside the config it was given (the config is input and stays as composed): built by
    :class:`attention_lab.run.task.RunTask` and handed to :func:`train`."""

    stop: StopSignals  # the signals that stop the run (SIGINT, SIGTERM), installed for as long as it runs
    accelerator: str  # Lightning's accelerator, resolved from the ``device`` knob by the checks (run/preflight.py)
    name: str = ""  # the run's overrides (attention_lab.run.overrides.run_name): its TensorBoard run, its map titles
    shown_hparams: tuple[str, ...] = ()  # what a sweep job's sweep varies: HParams columns beside every knob
    resume_from: Path | None = None  # the run dir whose checkpoints this run continues from; None = from step 0
    run_dir: Path | None = None  # the run's own dir (Hydra's output dir), the only place it writes; None = paths.output_dir


def epochs_for_steps(trainer: Any, batches: int, *, resuming: bool) -> int | None:
    """The Trainer's ``max_epochs`` for a run bounded by ``max_steps`` alone (``trainer``: the run's trainer config;
    ``batches``: the training batches of one epoch on one device), or None.

    Such a run has no epoch limit: Lightning keeps ``max_epochs=-1``, which the progress bar shows as "Epoch 0/-2".
    When the batches of an epoch are known before the Trainer is built, the Trainer gets the number of epochs that
    ``max_steps`` spans, so the bar reads "Epoch 3/23"; the limit never binds before ``max_steps`` does. Where an
    epoch's batches depend on what only the Trainer knows (several devices or nodes, ``limit_train_batches``), no
    bound is set and the bar shows -2."""
    if trainer.get("max_epochs") not in (None, -1) or (trainer.get("max_steps") or -1) <= 0 or batches <= 0:
        return None
    if any(trainer.get(key) not in (None, *plain) for key, plain in
           (("devices", (1, "1", "auto")), ("num_nodes", (1,)), ("limit_train_batches", (1.0,)),
            ("strategy", ("auto",)))):
        return None
    steps_per_epoch = math.ceil(batches / int(trainer.get("accumulate_grad_batches") or 1))
    # A resumed run may stand anywhere in its epoch: one more, so that max_steps is what ends it.
    return math.ceil(trainer.max_steps / steps_per_epoch) + (1 if resuming else 0)


def resolved(cfg: DictConfig) -> DictConfig:
    """A read-only copy of ``cfg`` with every interpolation resolved. Instantiating a node resolves in place the
    nodes it interpolates (``module.model: ${model}``): from this copy, the config the run was given stays as it is."""
    config = copy.deepcopy(cfg)
    with read_write(config):
        OmegaConf.resolve(config)
    OmegaConf.set_readonly(config, True)
    return config


def instantiate_all(cfg: DictConfig, group: str, run_name: str = "") -> dict[str, Any]:
    """Instantiate every entry of a group like `callbacks:` or `logger:` that has a _target_, handing the run's name
    to those that show it; keyed by the setting each was built from (``logger.tensorboard``)."""
    nodes = cfg.get(group) or {}
    return {f"{group}.{key}": hydra.utils.instantiate(node, **run_name_argument(node, run_name))
            for key, node in nodes.items() if node and "_target_" in node}


def run_name_argument(node: DictConfig, run_name: str) -> dict[str, str]:
    """How the class a node builds takes the run's name: TensorBoard's ``version`` (the run's folder and name in
    TensorBoard; a run without overrides gets a folder too, named as the attention tab names it, so that TensorBoard
    over the run dir lists it by that name and not as ``tensorboard``), a callback's ``run_name`` (its titles);
    nothing for the others, or where the config sets it."""
    built = hydra.utils.get_method(str(node["_target_"]))  # a class or a function (no get_object before Hydra 1.3.2)
    key = "version" if isinstance(built, type) and issubclass(built, TensorBoardLogger) else "run_name"
    takes = key in inspect.signature(built).parameters
    return {key: (run_name or NO_OVERRIDES) if key == "version" else run_name} if takes and key not in node else {}


# The steps the final metrics table shows, and what it says for one that never came (None in metrics.json).
TABLE_STEPS = {"global_step": "-", "steps_to_solve": "not solved", "formation_step": "not formed"}


def metrics_table(metrics: dict[str, Any]) -> str:
    """The final metrics as a small aligned table (entropies and hparams stay in metrics.json): the metrics to 4
    decimals, the steps as whole numbers."""
    shown = {k: v for k, v in metrics.items()
             if k.startswith(("val/", "ood/")) and not is_index_tag(k) or k in (*TABLE_STEPS, "params")}
    width = max(map(len, shown))
    unrecorded = {**TABLE_STEPS, "formation_step": unformed(metrics)}

    def cell(key: str, value: Any) -> str:
        if key in TABLE_STEPS:
            return unrecorded[key] if value is None else str(int(value))
        return f"{value:.4f}" if isinstance(value, float) else str(value)

    return "\n".join(f"  {key:<{width}}  {cell(key, value)}" for key, value in shown.items())


def interruption(signum: int, trainer: L.Trainer, graceful: GracefulStop) -> TrainingInterrupted:
    """A signal that came when no training step was left to end (after the last one, or during the final
    validation): the run is interrupted with what it had saved."""
    path = last_checkpoint_path(trainer)
    kept = f"the last checkpoint, {path}, is kept" if path.is_file() else "no checkpoint was saved"
    return TrainingInterrupted(signum, trainer.global_step, graceful.saved, detail=kept)


def quiet_console() -> None:
    """One line per message, and only the run's own: Lightning's package logger prints to the console itself
    as well as through the root logger that Hydra configured (every line twice), its Trainer announces the
    devices it did not find and tips at INFO, and torch warns Lightning about a deprecated call. Where srun is
    installed, Lightning warns (a PossibleUserWarning, at the Trainer, at fit and at validate) that a run started
    without it may hang: a hint for a SLURM allocation, noise outside one (no SLURM_JOB_ID). Inside one it stays:
    the lab's SLURM jobs come through submitit, which starts them with srun."""
    lightning = logging.getLogger("lightning")
    for handler in list(lightning.handlers):
        lightning.removeHandler(handler)  # its records still reach Hydra's console and train.log
    logging.getLogger("lightning.pytorch.utilities.rank_zero").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", category=FutureWarning, module=r"lightning\.")
    if "SLURM_JOB_ID" not in os.environ:
        warnings.simplefilter("ignore", PossibleUserWarning)


def train(cfg: DictConfig, context: RunContext) -> dict[str, Any]:
    """Train one run in ``cfg.paths.output_dir`` (``context``: what the run decided: its signals, its accelerator,
    its name, its HParams columns, the checkpoints it continues from); writes and returns its final metrics."""
    stop = context.stop
    quiet_console()
    cfg = resolved(cfg)
    output_dir = Path(cfg.paths.output_dir)
    if cfg.get("threads"):
        # These models are tiny: extra intra-op threads only spin-wait, and while other processes hold the cores
        # every small op waits for a descheduled thread (docs/benchmarks.md, "Thread spinning").
        torch.set_num_threads(cfg.threads)
    L.seed_everything(cfg.seed, workers=True, verbose=False)

    datamodule = hydra.utils.instantiate(cfg.data)
    # The data first (a large task.train_size takes minutes to build): a signal meanwhile stops the run at once,
    # before the model and the trainer exist; there is nothing to save yet.
    log.info("building the data: %d training and %d validation examples of task=%s", datamodule.task.train_size,
             cfg.task.val_size, cfg.task.name)  # train_size resolved: null is max_steps x batch_size
    with stop.raising(lambda signum: TrainingInterrupted(signum, 0, None, detail="stopped while the data was built, "
                                                         "before the model existed; nothing was saved")):
        datamodule.setup("fit")  # Trainer.fit's own call reuses it
    module = hydra.utils.instantiate(cfg.module, vocab=datamodule.vocab.itos)
    log.info("model: %d parameters; KV cache per token: %s", sum(p.numel() for p in module.parameters()),
             memory_line(module.model))
    graceful, solved = GracefulStop(stop), StepsToSolve()
    end_note = RunEndNote(stop, output_dir, example=example_text(cfg.task.name))
    configured, loggers = instantiate_all(cfg, "callbacks", context.name), instantiate_all(cfg, "logger", context.name)
    callbacks = [*configured.values(), graceful, StopOnNonFiniteLoss(), RngState(), solved, LastCheckpoint(), end_note]
    if cfg.trainer.get("enable_progress_bar") is False:  # quiet logs: drop the configured bar too
        callbacks = [c for c in callbacks if not isinstance(c, ProgressBar)]
    checkpoint = resume_checkpoint(context.resume_from) if context.resume_from is not None else None
    max_epochs = epochs_for_steps(cfg.trainer, len(datamodule.train_dataloader()), resuming=checkpoint is not None)
    trainer: L.Trainer = hydra.utils.instantiate(cfg.trainer, accelerator=context.accelerator, callbacks=callbacks,
                                                 logger=list(loggers.values()) or False,
                                                 plugins=[AtomicCheckpointIO()],
                                                 **({"max_epochs": max_epochs} if max_epochs else {}))
    check_writes(context.run_dir or output_dir, output_dir, trainer, {**configured, **loggers})
    if checkpoint is not None:
        log.info("resuming %s from %s", output_dir, checkpoint)
    elif context.resume_from is not None:
        log.warning("resume=%s: no checkpoint there; training starts again from step 0 in the same dir",
                    context.resume_from)
    startup_gc.resume()  # everything up to here lives as long as the run: frozen, out of every later collection
    trainer.fit(module, datamodule=datamodule, ckpt_path=checkpoint, weights_only=True)

    # The final metrics of the trained model, measured once more so that they are exact, not the last interval's.
    # One dict per validation set (val/*, then ood/* when task.ood_min_len..task.ood_max_len is set).
    # Every rank validates: under strategy=ddp (SLURM tasks, torchrun) it is a collective, and rank 0 alone would wait
    # for the others forever. The metrics are reduced over the ranks; only rank 0 writes them (below).
    # A signal now stops a single-process run at once: the final validation and its ablation passes can take
    # minutes on a large validation set, and there is nothing new to save. Under DDP a rank that left the
    # validation's collectives alone would leave the others waiting: there the signal counts after it.
    interrupted = functools.partial(interruption, trainer=trainer, graceful=graceful)
    if stop.signum is not None:  # it came after the last step
        raise interrupted(stop.signum)
    log.info("training done at step %d; final validation", trainer.global_step)
    with stop.raising(interrupted) if trainer.world_size == 1 else contextlib.nullcontext():
        results = trainer.validate(module, datamodule=datamodule, verbose=False)
    if stop.signum is not None:
        raise interrupted(stop.signum)
    final = {key: value for result in results for key, value in result.items()}
    metrics: dict[str, Any] = {key: float(value) for key, value in final.items()}
    # No wall time (that is in run_info.json): reruns give a byte-identical file. The knobs a sweep varies ride
    # along under "hparams", as in TensorBoard's HParams tab.
    metrics.update(global_step=trainer.global_step, params=sum(p.numel() for p in module.parameters()),
                   state_size=module.model.state_size(), steps_to_solve=solved.step)
    for callback in callbacks:
        if isinstance(callback, Findings):  # e.g. when the induction heads formed
            metrics.update(callback.findings())
    metrics["hparams"] = hparams_for_dashboard(cfg)
    if cfg.optimized_metric not in metrics:  # e.g. head_score/induction on a task whose words never repeat
        log.warning("optimized_metric=%s was not measured in this run: a sweeper gets no value from it",
                    cfg.optimized_metric)
    if trainer.is_global_zero:
        write_metrics(output_dir / METRICS, metrics)
        table = hparams_table(cfg, context.shown_hparams, context.name, metrics)
        for logger in trainer.loggers:
            if isinstance(logger, TensorBoardLogger):  # HParams: the knobs beside their final metrics
                write_table(logger, table, trainer.global_step)
            else:
                logger.log_hyperparams(table.values)
                logger.log_metrics(table.metrics, step=trainer.global_step)
            logger.finalize("success")
        log.info("final metrics of %s:\n%s", output_dir, metrics_table(metrics))
        log.info(end_note.note())
    return metrics
