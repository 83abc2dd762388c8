"""Typed schema of ``configs/``: Hydra checks every override against these dataclasses at
compose time, so a typo or a wrong type fails before anything is imported or trained.

Cross-field rules (d_model divisible by heads, a mask that fits the variant, ...) live in
:func:`validate` and raise :class:`ConfigError` with one line naming the setting.
This module must stay light (no torch import): ``train.py --help`` and config errors use it.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING

VARIANTS = ("simple", "self", "cross", "multihead", "multihead_concat")
MULTI_HEAD_VARIANTS = ("multihead", "multihead_concat")
TASKS = ("copy", "reverse", "sort", "next_word")
VAL_METRICS = ("val/seq_acc", "val/token_acc", "val/loss")  # what train.py's final validation measures
_ENTROPY_METRIC = re.compile(r"attention_entropy/layer\d+/head\d+")


class ConfigError(ValueError):
    """A setting that cannot work; the message is one line naming the setting."""


class Mask(str, Enum):
    none = "none"
    causal = "causal"
    padding = "padding"


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"
    mps = "mps"


@dataclass
class ModelConfig:
    name: str = MISSING  # attention variant: one of VARIANTS
    d_model: int = "${d_model}"  # type: ignore[assignment]  # width of embeddings and blocks
    num_heads: int = "${heads}"  # type: ignore[assignment]
    layers: int = "${layers}"  # type: ignore[assignment]
    dropout: float = 0.0
    qkv_bias: bool = False
    context_length: int = 16  # rows of the positional embedding table (longest sequence)
    normalize: str = "softmax"  # 'simple' only: softmax | sum


@dataclass
class BlockConfig:
    name: str = MISSING
    residual: bool = True
    layer_norm: bool = True
    mlp: bool = True
    mlp_ratio: int = 4


@dataclass
class TaskConfig:
    name: str = MISSING  # one of TASKS
    corpus: str | None = None  # path to a UTF-8 text file, one sentence per line; None = the notebooks'
    min_len: int = 3
    max_len: int = 8
    train_size: int = 4000
    val_size: int = 500


@dataclass
class TrainConfig:
    model: ModelConfig = MISSING
    block: BlockConfig = MISSING
    task: TaskConfig = MISSING
    trainer: Any = MISSING
    logger: Any = None
    callbacks: Any = None
    paths: Any = None
    # Top-level knobs, overridden bare: `python scripts/train.py heads=3 d_model=96`.
    heads: int = 4
    d_model: int = 48
    layers: int = 2
    mask: Mask = Mask.padding
    device: Device = Device.auto
    seed: int = 0
    threads: int | None = 1  # torch CPU threads; None = torch's default (one per core)
    lr: float = 3e-3
    weight_decay: float = 0.0
    batch_size: int = 64
    max_steps: int = 1500
    max_epochs: int | None = None
    optimized_metric: str = "val/seq_acc"
    probe: str = "Life is short, eat dessert first"
    log_attention_every_n_steps: int = 200
    num_predictions_logged: int = 4
    tags: list = field(default_factory=list)
    # Run dir of an interrupted run to continue (scripts/train.py rewrites `resume=<dir>` into that run's
    # overrides + hydra.run.dir=<dir>); None = a new run.
    resume: str | None = None


def register_configs() -> None:
    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainConfig)
    cs.store(group="model", name="model_schema", node=ModelConfig)
    cs.store(group="block", name="block_schema", node=BlockConfig)
    cs.store(group="task", name="task_schema", node=TaskConfig)


def validate(cfg: Any) -> None:
    """Cross-field checks the types cannot express. Raises ConfigError (one line)."""

    def positive(key: str, value: Any, optional: bool = False) -> None:
        if value is None and not optional:
            raise ConfigError(f"{key}=null is invalid: it must be a positive integer")
        if value is not None and value <= 0:
            raise ConfigError(f"{key}={value} is invalid: it must be a positive integer")

    model, task = cfg.model, cfg.task
    if model.name not in VARIANTS:
        raise ConfigError(f"model={model.name} is unknown: choose one of {', '.join(VARIANTS)}")
    if task.name not in TASKS:
        raise ConfigError(f"task={task.name} is unknown: choose one of {', '.join(TASKS)}")
    for key in ("heads", "d_model", "layers", "batch_size", "max_steps", "log_attention_every_n_steps"):
        positive(key, cfg.get(key))
    for key, value in (("model.num_heads", model.get("num_heads")), ("model.d_model", model.get("d_model")),
                       ("model.layers", model.get("layers")), ("model.context_length", model.context_length),
                       ("task.min_len", task.min_len), ("task.max_len", task.max_len),
                       ("task.train_size", task.train_size), ("task.val_size", task.val_size),
                       ("block.mlp_ratio", cfg.block.mlp_ratio)):
        positive(key, value)
    positive("max_epochs", cfg.get("max_epochs"), optional=True)
    positive("threads", cfg.get("threads"), optional=True)
    if (cfg.get("num_predictions_logged") or 0) < 0:
        raise ConfigError(f"num_predictions_logged={cfg.num_predictions_logged} is invalid: it must be >= 0")
    seed = cfg.get("seed")
    if seed is None or not 0 <= seed < 2**32:
        raise ConfigError(f"seed={seed} is invalid: it must be an integer in [0, 2**32)")
    if task.min_len > task.max_len:
        raise ConfigError(f"task.min_len={task.min_len} is invalid: it must be <= task.max_len={task.max_len}")
    if task.max_len > model.context_length:
        raise ConfigError(
            f"task.max_len={task.max_len} is invalid: sequences longer than the positional table "
            f"(model.context_length={model.context_length}) cannot be embedded; raise model.context_length"
        )
    if not 0.0 <= model.dropout < 1.0:
        raise ConfigError(f"model.dropout={model.dropout} is invalid: it must be in [0, 1)")
    lr = cfg.get("lr")
    if lr is None or not 0 < lr < math.inf:
        raise ConfigError(f"lr={lr} is invalid: the learning rate must be a finite number > 0")
    weight_decay = cfg.get("weight_decay")
    if weight_decay is None or not 0 <= weight_decay < math.inf:
        raise ConfigError(f"weight_decay={weight_decay} is invalid: it must be a finite number >= 0")
    metric = cfg.get("optimized_metric")
    if metric not in VAL_METRICS and not _ENTROPY_METRIC.fullmatch(str(metric)):
        raise ConfigError(
            f"optimized_metric={metric} is invalid: choose one of {', '.join(VAL_METRICS)} "
            "or attention_entropy/layer<l>/head<h>"
        )
    if model.name in MULTI_HEAD_VARIANTS and model.d_model % model.num_heads:
        raise ConfigError(
            f"heads={model.num_heads} does not divide d_model={model.d_model} for model={model.name}: "
            "choose heads among the divisors of d_model, or change d_model"
        )
    if model.name == "simple" and model.normalize not in ("softmax", "sum"):
        raise ConfigError(f"model.normalize={model.normalize} is invalid: choose softmax or sum")
    mask = Mask(cfg.mask)
    if task.name == "next_word" and mask is not Mask.causal:
        raise ConfigError(
            f"mask={mask.value} is invalid for task=next_word: each position would see the word it must "
            "predict; use mask=causal"
        )
    if model.name == "cross":
        if task.name == "next_word":
            raise ConfigError(
                "task=next_word is invalid for model=cross: encoder-decoder attention needs a source "
                "sequence; use copy, reverse or sort"
            )
        if mask is Mask.causal:
            raise ConfigError(
                "mask=causal is invalid for model=cross: decoder queries attend to the whole encoded "
                "source; use mask=padding or none"
            )
