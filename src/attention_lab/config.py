"""Typed schema of ``configs/``: Hydra checks every override against these dataclasses at compose time,
so a typo or a wrong type fails before anything is imported or trained.

:class:`ModelConfig` is the one model config object (as nanoGPT's ``GPTConfig``): it is composed from
``configs/model/`` and ``configs/block/``, handed to :class:`~attention_lab.model.SequenceModel` and to the
LightningModule, and saved in every checkpoint's hparams as a plain dict.

This module stays light (no torch import): ``train.py --help`` and config errors use it.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from hydra.core.config_store import ConfigStore
from omegaconf import MISSING, OmegaConf


class Mask(str, Enum):
    none = "none"
    causal = "causal"  # a position sees only itself and earlier positions
    padding = "padding"  # no query attends to <pad> keys


class Position(str, Enum):
    learned = "learned"  # a trained table added to the token embeddings
    sinusoidal = "sinusoidal"  # fixed sines and cosines added to the token embeddings (Vaswani et al. 2017)
    rope = "rope"  # rotary embeddings of queries and keys inside attention (Su et al. 2021)
    alibi = "alibi"  # distance penalties on the attention scores (Press et al. 2022)
    none = "none"  # no position information at all (NoPE; Kazemnejad et al. 2023)


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"
    mps = "mps"


ALL_MASKS = [m.value for m in Mask]
ALL_POSITIONS = [p.value for p in Position]


def typed(schema: type, values: Any) -> Any:
    """Plain values (a dict, or an untyped DictConfig read from a run dir) -> the schema's dataclass, checked."""
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), values))


@dataclass
class BlockConfig:
    name: str = MISSING
    residual: bool = True
    layer_norm: bool = True
    mlp: bool = True
    mlp_ratio: int = 4


@dataclass
class ModelConfig:
    name: str = MISSING  # attention variant: a name registered in attention_lab.attention
    d_model: int = 48  # width of embeddings and blocks
    num_heads: int = 4
    layers: int = 2
    kv_heads: int | None = None  # None: one key/value head per query head
    mask: Mask = Mask.padding
    window: int | None = None  # None: every key; w: only keys less than w positions away
    position: Position = Position.learned
    block: BlockConfig = field(default_factory=lambda: BlockConfig(name="transformer"))
    dropout: float = 0.0
    qkv_bias: bool = False
    context_length: int = 16  # rows of the positional embedding table (longest sequence)
    normalize: str | None = None  # 'simple' only (its yaml sets it): softmax | sum
    # What the variant's yaml declares about it, so that config checks need no torch import
    # (tests/test_configs.py checks these against the attention classes).
    encoder_decoder: bool = False  # self-attention encoder + cross-attention decoder (cross)
    masks: list[str] = field(default_factory=lambda: list(ALL_MASKS))  # the masks the variant accepts
    positions: list[str] = field(default_factory=lambda: list(ALL_POSITIONS))  # the positions it accepts
    grouped_kv: bool = False  # accepts kv_heads (grouped-query attention)
    learned_heads: bool = True  # its heads have weights of their own (simple's do not: no head to ablate)
    rejects: list[str] = field(default_factory=list)  # knobs it does not take: window, dropout

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModelConfig:
        """The config saved in a checkpoint's hparams (plain types) -> ModelConfig, type-checked."""
        return typed(cls, values)

    def to_dict(self) -> dict[str, Any]:
        """Plain types only (enums as their values): safe to load with ``torch.load(weights_only=True)``."""
        values = dataclasses.asdict(self)
        values["mask"] = Mask(self.mask).value
        values["position"] = Position(self.position).value
        return values


@dataclass
class TaskConfig:
    name: str = MISSING  # a task module of attention_lab.data.tasks
    corpus: str | None = None  # path to a UTF-8 text file, one sentence per line; None = the notebooks'
    words: int | None = None  # the vocabulary's words: None = the corpus's; N = the corpus's, then w0, w1, ... to N
    min_len: int = 3
    max_len: int = 8
    train_size: int = 4000
    val_size: int = 500
    pairs: int = 4  # task=recall: key-value pairs in each input
    queries: int = 2  # task=recall: keys asked for after the pairs (at most task.pairs)
    delay: int = 0  # task=copy: each word is output this many positions later (0: plain copy)
    ood_min_len: int | None = None  # a second validation set of longer inputs (ood/*): None = none
    ood_max_len: int | None = None
    masks: list[str] = field(default_factory=lambda: list(ALL_MASKS))  # the masks the task can be learned with


@dataclass
class TrainConfig:
    model: ModelConfig = MISSING
    block: BlockConfig = MISSING
    task: TaskConfig = MISSING
    trainer: Any = MISSING
    logger: Any = None
    callbacks: Any = None
    paths: Any = None
    data: Any = None  # the datamodule (_target_), built from `task`
    module: Any = None  # the LightningModule (_target_), built from `model`
    # Top-level knobs, overridden bare: `python scripts/train.py heads=3 d_model=96`.
    heads: int = 4
    kv_heads: int | None = None
    d_model: int = 48
    layers: int = 2
    mask: Mask = Mask.padding
    window: int | None = None
    position: Position = Position.learned
    device: Device = Device.auto
    seed: int = 0
    threads: int | None = 1  # torch CPU threads; None = torch's default (one per core)
    lr: float = 3e-3
    weight_decay: float = 0.0
    batch_size: int = 64
    max_steps: int = 1500
    max_epochs: int | None = None
    optimized_metric: str = "val/seq_acc"
    probe: str | None = None  # the words whose attention the run shows; None = the task's own (data/probe.py)
    log_attention_every_n_steps: int = 200
    num_predictions_logged: int = 4
    ablation: list[str] | None = None  # head ablations at the end: zero, mean; None = both (where heads learn)
    ablation_every_validation: bool = False  # ... and at every validation during training
    tags: list = field(default_factory=list)
    run_name: str = ""  # set by the run from its overrides (attention_lab.run.overrides.run_name)
    shown_hparams: list = field(default_factory=list)  # set by a sweep job: what its sweep varies (HParams columns)
    resume: str | None = None  # run dir to continue: `python scripts/train.py resume=<run dir>`


# In configs/, the model's fields follow the top-level knobs (`heads=3` sets model.num_heads).
FROM_KNOBS = {"d_model": "${d_model}", "num_heads": "${heads}", "layers": "${layers}", "kv_heads": "${kv_heads}",
              "mask": "${mask}", "window": "${window}", "position": "${position}", "block": "${block}"}


def register_configs() -> None:
    """The schema for Hydra, and the resolvers of configs/hydra/default.yaml: ``${lab.run_dir:${resume},<new>}``
    keeps a resumed run in its own dir, and ``${lab.output_subdir:${resume}}`` stops Hydra from rewriting that
    run's .hydra/ record (the task function updates it once the resumed run has started)."""
    OmegaConf.register_new_resolver(
        "lab.run_dir", lambda resume, new: os.path.abspath(os.path.expanduser(str(resume))) if resume else new,
        replace=True)
    OmegaConf.register_new_resolver("lab.output_subdir", lambda resume: None if resume else ".hydra", replace=True)
    # A resumed Optuna sweep's new jobs go after the existing job dirs (the sweeper numbers each launch from 0).
    OmegaConf.register_new_resolver("lab.job_subdir", lambda num, offset: str(int(num) + int(offset)), replace=True)
    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainConfig)
    model = OmegaConf.structured(ModelConfig)
    for key, interpolation in FROM_KNOBS.items():
        model[key] = interpolation  # an interpolation may stand in for any typed value
    cs.store(group="model", name="model_schema", node=model)
    cs.store(group="block", name="block_schema", node=BlockConfig)
    cs.store(group="task", name="task_schema", node=TaskConfig)
