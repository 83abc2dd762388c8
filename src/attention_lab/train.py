"""Compose -> validate -> instantiate -> fit -> final metrics. Called by scripts/train.py."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

import hydra
import lightning as L
import torch
from omegaconf import DictConfig, OmegaConf

from attention_lab.config import ConfigError, Mask, validate
from attention_lab.data.datamodule import SentenceTaskDataModule
from attention_lab.lit_module import AttentionLitModule

log = logging.getLogger(__name__)


def resolve_accelerator(device: str) -> str:
    """Map the `device` knob to a Lightning accelerator, failing early when it isn't there."""
    if device == "auto":
        if torch.cuda.is_available():
            return "gpu"
        return "mps" if torch.backends.mps.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda is invalid: no CUDA GPU is visible to torch here; use device=cpu or device=auto")
    if device == "mps" and not torch.backends.mps.is_available():
        raise ConfigError("device=mps is invalid: Apple's MPS backend is not available here; use device=cpu or device=auto")
    return {"cpu": "cpu", "cuda": "gpu", "mps": "mps"}[device]


def build_datamodule(cfg: DictConfig) -> SentenceTaskDataModule:
    task = cfg.task
    return SentenceTaskDataModule(task.name, corpus=task.corpus, min_len=task.min_len, max_len=task.max_len,
                                  train_size=task.train_size, val_size=task.val_size,
                                  batch_size=cfg.batch_size, seed=cfg.seed)


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


def train(cfg: DictConfig) -> float:
    """Train one run; returns the value of `optimized_metric` (for sweepers such as Optuna)."""
    started = time.perf_counter()
    validate(cfg)
    accelerator = cfg.trainer.get("accelerator") or resolve_accelerator(cfg.device)
    output_dir = Path(cfg.paths.output_dir)
    L.seed_everything(cfg.seed, workers=True)

    datamodule = build_datamodule(cfg)
    module = build_module(cfg, datamodule.vocab.itos)
    loggers = instantiate_all(cfg.get("logger"))
    callbacks = instantiate_all(cfg.get("callbacks"))
    trainer: L.Trainer = hydra.utils.instantiate(cfg.trainer, accelerator=accelerator, logger=loggers or False,
                                                 callbacks=callbacks)
    log.info("run dir: %s", output_dir)
    trainer.fit(module, datamodule=datamodule)

    # Final metrics of the trained model, measured once more so that they are exact, not the last interval's.
    final = trainer.validate(module, datamodule=datamodule, verbose=False)[0] if trainer.is_global_zero else {}
    metrics = {key: float(value) for key, value in final.items()}
    metrics.update(
        global_step=trainer.global_step,
        params=sum(p.numel() for p in module.parameters()),
        wall_time_s=round(time.perf_counter() - started, 2),
    )
    if cfg.optimized_metric not in metrics:
        raise ConfigError(f"optimized_metric={cfg.optimized_metric} is invalid: choose one of {', '.join(sorted(final))}")
    if trainer.is_global_zero:
        (output_dir / "metrics.json").write_text(json.dumps(metrics, indent=2, sort_keys=True) + "\n")
        for logger in trainer.loggers:
            hp_metrics = {f"hp/{key.replace('/', '_')}": value for key, value in final.items() if key.startswith("val/")}
            logger.log_hyperparams(hparams_for_dashboard(cfg), metrics=hp_metrics)
            logger.finalize("success")
        log.info("final metrics: %s", json.dumps(metrics))
    return metrics[cfg.optimized_metric]


def config_summary(cfg: DictConfig) -> str:
    return OmegaConf.to_yaml(cfg, resolve=True)
