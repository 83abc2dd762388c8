"""Compose -> validate -> instantiate -> fit -> final metrics. Called by scripts/train.py (through
attention_lab.resilience.run_task, which adds the preflight checks, run_info.json and one-line errors)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import hydra
import lightning as L
import torch
from lightning.pytorch.callbacks import ProgressBar
from omegaconf import DictConfig, OmegaConf

from attention_lab.config import ConfigError, Mask, validate
from attention_lab.data.datamodule import SentenceTaskDataModule
from attention_lab.lit_module import AttentionLitModule
from attention_lab.resilience import METRICS, resolve_accelerator, write_json
from attention_lab.safety import GracefulStop, ResumableSentenceTaskDataModule, RngState, StopOnNonFiniteLoss

__all__ = ["build_datamodule", "build_module", "config_summary", "hparams_for_dashboard", "instantiate_all",
           "resolve_accelerator", "resume_checkpoint", "train"]

log = logging.getLogger(__name__)


def build_datamodule(cfg: DictConfig) -> SentenceTaskDataModule:
    """The task's data; its training batches can resume mid-epoch (same order as an uninterrupted run)."""
    task = cfg.task
    return ResumableSentenceTaskDataModule(task.name, corpus=task.corpus, min_len=task.min_len,
                                           max_len=task.max_len, train_size=task.train_size,
                                           val_size=task.val_size, batch_size=cfg.batch_size, seed=cfg.seed)


def build_module(cfg: DictConfig, vocab: list[str]) -> AttentionLitModule:
    model, block = cfg.model, cfg.block
    return AttentionLitModule(
        vocab=vocab, attention=model.name, d_model=model.d_model, num_heads=model.num_heads, layers=model.layers,
        context_length=model.context_length, mask=Mask(cfg.mask).value, dropout=model.dropout,
        qkv_bias=model.qkv_bias, normalize=model.normalize, residual=block.residual, layer_norm=block.layer_norm,
        mlp=block.mlp, mlp_ratio=block.mlp_ratio, lr=cfg.lr, weight_decay=cfg.weight_decay,
    )


def instantiate_all(group: DictConfig | None) -> list[Any]:
    """Instantiate every entry of a group like `callbacks:` or `logger:` that has a _target_."""
    if not group:
        return []
    return [hydra.utils.instantiate(node) for node in group.values() if node and "_target_" in node]


def hparams_for_dashboard(cfg: DictConfig) -> dict[str, Any]:
    """The knobs a sweep varies, flat, for TensorBoard's HParams table."""
    return {
        "model": cfg.model.name, "heads": cfg.model.num_heads, "d_model": cfg.d_model, "layers": cfg.layers,
        "mask": Mask(cfg.mask).value, "block": cfg.block.name, "task": cfg.task.name, "lr": cfg.lr,
        "batch_size": cfg.batch_size, "dropout": cfg.model.dropout, "seed": cfg.seed,
    }


def resume_checkpoint(cfg: DictConfig, output_dir: Path) -> str | None:
    """<run dir>/checkpoints/last.ckpt when `resume` is set (scripts/train.py resume=<run dir>)."""
    if not cfg.get("resume"):
        return None
    checkpoint = output_dir / "checkpoints" / "last.ckpt"
    if checkpoint.is_file():
        log.info("resuming %s from %s", output_dir, checkpoint)
        return str(checkpoint)
    log.warning("resume=%s: no checkpoint there (%s); training starts again from step 0 in the same dir",
                cfg.resume, checkpoint)
    return None


def train(cfg: DictConfig) -> float:
    """Train one run; returns the value of `optimized_metric` (for sweepers such as Optuna).

    SIGINT/SIGTERM (under resilience.graceful_signals) raise TrainingInterrupted after saving last.ckpt;
    a nan/inf loss raises TrainingDiverged; `resume` continues from <run dir>/checkpoints/last.ckpt."""
    validate(cfg)
    accelerator = resolve_accelerator(cfg.device, cfg.trainer.get("accelerator"))
    output_dir = Path(cfg.paths.output_dir)
    if cfg.get("threads"):
        # These models are tiny: extra intra-op threads only spin, and under load they cost 10x per step.
        torch.set_num_threads(cfg.threads)
    L.seed_everything(cfg.seed, workers=True)

    datamodule = build_datamodule(cfg)
    module = build_module(cfg, datamodule.vocab.itos)
    loggers = instantiate_all(cfg.get("logger"))
    callbacks = [*instantiate_all(cfg.get("callbacks")), GracefulStop(), StopOnNonFiniteLoss(), RngState()]
    if cfg.trainer.get("enable_progress_bar") is False:  # quiet logs: drop the configured bar too
        callbacks = [c for c in callbacks if not isinstance(c, ProgressBar)]
    trainer: L.Trainer = hydra.utils.instantiate(cfg.trainer, accelerator=accelerator, logger=loggers or False,
                                                 callbacks=callbacks)
    log.info("run dir: %s", output_dir)
    trainer.fit(module, datamodule=datamodule, ckpt_path=resume_checkpoint(cfg, output_dir))

    # Final metrics of the trained model, measured once more so that they are exact, not the last interval's.
    final = trainer.validate(module, datamodule=datamodule, verbose=False)[0] if trainer.is_global_zero else {}
    metrics = {key: float(value) for key, value in final.items()}
    # Metrics only (no wall time: that is in run_info.json), so that reruns give a byte-identical file.
    metrics.update(global_step=trainer.global_step, params=sum(p.numel() for p in module.parameters()))
    if trainer.is_global_zero:
        write_json(output_dir / METRICS, metrics)
        for logger in trainer.loggers:
            hp_metrics = {f"hp/{key.replace('/', '_')}": value for key, value in final.items() if key.startswith("val/")}
            logger.log_hyperparams(hparams_for_dashboard(cfg), metrics=hp_metrics)
            logger.finalize("success")
        log.info("final metrics: %s", json.dumps(metrics))
    if cfg.optimized_metric not in metrics:  # after writing metrics.json: the run's results are kept
        raise ConfigError(f"optimized_metric={cfg.optimized_metric} is invalid: choose one of {', '.join(sorted(final))}")
    return metrics[cfg.optimized_metric]


def config_summary(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg, resolve=True)
