"""Typed schema of ``configs/``: Hydra checks every override against these dataclasses at compose time,
so a typo or a wrong type fails before anything is imported or trained.

:class:`ModelConfig` is the one model config object (as nanoGPT's ``GPTConfig``): it is composed from
``configs/model/`` and ``configs/block/``, handed to :class:`~attention_lab.model.SequenceModel` and to the
LightningModule, and saved in every checkpoint's hparams as a plain dict.

What a variant is and takes (one head or several, encoder-decoder, its own options) is declared once, by its
class in :mod:`attention_lab.attention`; the config holds only what the user chooses. ``model.options`` are the
variant's own ``build_attention`` keywords (``configs/model/simple.yaml``: ``normalize``); likewise ``task.options``
are the task's own knobs, declared by its class (``Options`` in :mod:`attention_lab.data.tasks`).

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

from attention_lab.attention.declared import declared_variants
from attention_lab.attention.positions import Position


class Mask(str, Enum):
    none = "none"
    causal = "causal"  # a position sees only itself and earlier positions
    padding = "padding"  # no query attends to <pad> keys


class Device(str, Enum):
    auto = "auto"
    cpu = "cpu"
    cuda = "cuda"
    mps = "mps"


ALL_MASKS = [m.value for m in Mask]
# Fields that checkpoints saved before the variants' facts moved to their classes may still hold.
RETIRED_MODEL_FIELDS = ("encoder_decoder", "masks", "positions", "grouped_kv", "learned_heads", "rejects")


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
    smeared_keys: bool = False  # each key mixed with the previous one, a learned share per head (Olsson et al.)
    block: BlockConfig = field(default_factory=lambda: BlockConfig(name="transformer"))
    dropout: float = 0.0
    qkv_bias: bool = False
    context_length: int = 16  # rows of the positional embedding table (longest sequence)
    options: dict[str, Any] = field(default_factory=dict)  # the variant's own build_attention keywords
    # One variant per layer (a hybrid stack); None: every layer is `name`'s. Typed Any: a list-typed field cannot
    # hold the ${mixers} interpolation while Hydra merges the model group (the top-level knob is list-typed).
    mixers: Any = None

    def layer_variants(self) -> list[str]:
        """Each block's attention variant, by layer."""
        return list(self.mixers) if self.mixers else [self.name] * self.layers

    def layer_heads(self, variant: str) -> int:
        """Heads of a block of ``variant``: the model's, or 1 for a single-head variant."""
        return self.num_heads if declared_variants(only=variant)[variant].multi_head else 1

    @property
    def encoder_decoder(self) -> bool:
        """Self-attention encoder + a decoder of the variant's blocks: the variant takes a source (cross)."""
        return declared_variants(only=self.name)[self.name].takes_source

    @property
    def learned_heads(self) -> bool:
        """Some layer's heads have weights of their own (simple's do not: no head for an ablation to switch off)."""
        return any(declared_variants(only=name)[name].learned_heads for name in set(self.layer_variants()))

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> ModelConfig:
        """The config saved in a checkpoint's hparams (plain types) -> ModelConfig, type-checked. A checkpoint of an
        earlier version may hold the variant's facts (now its class's) and simple's ``normalize`` as a field."""
        values = {key: value for key, value in values.items() if key not in RETIRED_MODEL_FIELDS}
        if "normalize" in values:
            normalize = values.pop("normalize")
            values["options"] = {**values.get("options", {}), **({"normalize": normalize} if normalize else {})}
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
    bos: bool = False  # prepend <bos> to every input (its target is ignored): a first token for heads to sink into
    ood_min_len: int | None = None  # a second validation set of longer inputs (ood/*): None = none
    ood_max_len: int | None = None
    masks: list[str] = field(default_factory=lambda: list(ALL_MASKS))  # the masks the task can be learned with
    # The task's own knobs (task.options.pairs=8), declared with their defaults by its class's Options
    # (attention_lab.data.tasks); any name may be set here, and the config checks refuse one the task lacks.
    options: dict[str, Any] = field(default_factory=dict)


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
    smeared_keys: bool = False
    mixers: list[str] | None = None
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
    log_attention_every_n_steps: int = 10  # the first interval (callbacks/log_schedule.py)
    num_predictions_logged: int = 4
    ablation: list[str] | None = None  # head ablations at the end: zero, mean; None = both (where heads learn)
    ablation_every_validation: bool = False  # ... and at every validation during training
    patching: bool = True  # activation patching at the end, where the task has a corruption (data/tasks)
    patching_every_validation: bool = False  # ... and at every validation during training
    tags: list = field(default_factory=list)
    resume: str | None = None  # run dir to continue: `python scripts/train.py resume=<run dir>`


# In configs/, the model's fields follow the top-level knobs: model field -> the knob that sets it.
KNOB_OF_FIELD = {"d_model": "d_model", "num_heads": "heads", "layers": "layers", "kv_heads": "kv_heads",
                 "mask": "mask", "window": "window", "position": "position", "block": "block",
                 "mixers": "mixers", "smeared_keys": "smeared_keys"}
# `heads` sets model.num_heads of a variant with several heads; a single-head variant's is 1 (its class says so).
FROM_KNOBS = {**{field_name: f"${{{knob}}}" for field_name, knob in KNOB_OF_FIELD.items()},
              "num_heads": "${lab.num_heads:${.name},${heads},${mixers}}"}


def setting_name(model_field: str) -> str:
    """How a user writes a model field: its knob (``heads`` for num_heads), else ``model.<field>``."""
    return KNOB_OF_FIELD.get(model_field, f"model.{model_field}")


def num_heads_of(variant: str, heads: Any, mixers: Any = None) -> Any:
    """model.num_heads: the ``heads`` knob for a variant with several heads, 1 for a single-head one (an unknown
    variant keeps the knob: building it fails, naming the variant). With ``mixers``, the knob where any layer's
    variant has several heads (each single-head layer has 1: ModelConfig.layer_heads)."""
    names = [str(name) for name in mixers] if mixers else [str(variant)]
    facts = [declared_variants(only=name).get(name) for name in names]
    return heads if any(fact is None or fact.multi_head for fact in facts) else 1


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
    OmegaConf.register_new_resolver("lab.num_heads", num_heads_of, replace=True, use_cache=True)
    cs = ConfigStore.instance()
    cs.store(name="train_schema", node=TrainConfig)
    model = OmegaConf.structured(ModelConfig)
    for key, interpolation in FROM_KNOBS.items():
        model[key] = interpolation  # an interpolation may stand in for any typed value
    cs.store(group="model", name="model_schema", node=model)
    cs.store(group="block", name="block_schema", node=BlockConfig)
    task = OmegaConf.structured(TaskConfig)
    # task.options.<name>=v without a `+`: the task's class, not this schema, knows its options (checks.py).
    OmegaConf.set_struct(task.options, False)
    cs.store(group="task", name="task_schema", node=task)
