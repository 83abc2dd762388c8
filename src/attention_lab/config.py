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

from attention_lab.attention.declared import VariantFacts, declared_variants
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


class ClampKind(str, Enum):
    """What a clamped head's output becomes during training (the ``clamp_kind`` knob; callbacks/clamping.py)."""

    zero = "zero"  # 0: the head says nothing
    mean = "mean"  # its mean over the batch's real queries at each position: what it says whatever the input


ALL_MASKS = [m.value for m in Mask]
SCHEMA_SUFFIX = "_schema"  # a schema's name in Hydra's ConfigStore (train_schema), left out of --help's options


def typed(schema: type, values: Any) -> Any:
    """Plain values (a dict, or an untyped DictConfig read from a run dir) -> the schema's dataclass, checked."""
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(schema), values))


def knob(default: Any = MISSING, *, help: str, more: str = "", sets: str | None = None) -> Any:
    """A top-level knob of :class:`TrainConfig`, its meaning kept with it: ``help`` is the one line ``--help`` shows,
    ``more`` what docs/configuration.md's table adds (:mod:`attention_lab.run.config_help` writes the help,
    :mod:`attention_lab.docs_tables` the table). ``sets``: the :class:`ModelConfig` field the knob sets (configs/model/
    interpolates it), whose default is the knob's."""
    metadata = {"help": help, "more": more, **({"sets": sets} if sets else {})}
    if sets is not None:
        model_default = next(f.default for f in dataclasses.fields(ModelConfig) if f.name == sets)
        return field(default=model_default, metadata=metadata)
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def knob_names() -> list[str]:
    """The top-level knobs, in the schema's order: the fields of TrainConfig declared with :func:`knob`."""
    return [f.name for f in dataclasses.fields(TrainConfig) if "help" in f.metadata]


@dataclass
class BlockConfig:
    name: str = MISSING
    residual: bool = True
    layer_norm: bool = True
    mlp: bool = True
    mlp_ratio: int = 4


@dataclass
class ModelConfig:
    """A field that a top-level knob sets (``TrainConfig``'s ``knob(sets=...)``) means what the knob's help says;
    its default here is the knob's default too."""

    name: str = MISSING  # attention variant: a name registered in attention_lab.attention
    d_model: int = 48
    num_heads: int = 4
    layers: int = 2
    kv_heads: int | None = None
    mask: Mask = Mask.padding
    window: int | None = None
    position: Position = Position.learned
    smeared_keys: bool = False
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
        return block_heads(self.num_heads, declared_variants(only=variant)[variant])

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
        """The config saved in a checkpoint's hparams (plain types, :meth:`to_dict`) -> ModelConfig, type-checked:
        a field the schema does not have is refused."""
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
    train_size: int | None = 4000  # None: max_steps × batch_size, new inputs every step (data/train_size.py)
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
    # The groups' schemas: each model/, block/ and task/ yaml is merged onto its node, so a wrong type or an unknown
    # key in one fails at compose time (and the yaml needs no defaults list of its own).
    model: ModelConfig = field(default_factory=ModelConfig)
    block: BlockConfig = field(default_factory=BlockConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    trainer: Any = MISSING
    logger: Any = None
    callbacks: Any = None
    paths: Any = None
    data: Any = None  # the datamodule (_target_), built from `task`
    module: Any = None  # the LightningModule (_target_), built from `model`
    # Top-level knobs, overridden bare: `python scripts/train.py heads=3 d_model=96`.
    heads: int = knob(sets="num_heads", help="attention heads; must divide d_model (single-head variants use 1)",
                      more="With a single-head variant, `heads` other than 1 typed on a run's command line is an "
                      "error; in a sweep such a job is the variant's one-head job. `conv` has one filter per head")
    kv_heads: int | None = knob(sets="kv_heads", help="key/value heads shared by groups of query heads (1: "
                                "multi-query); null: heads", more="A divisor of `heads`, for the variants that "
                                "share keys and values between heads (their class declares `grouped_kv`)")
    d_model: int = knob(sets="d_model", help="width of the embeddings and blocks")
    layers: int = knob(sets="layers", help="attention blocks (model=cross: as many encoder and decoder blocks)")
    mask: Mask = knob(sets="mask", help="none: all keys; causal: itself and earlier ones; padding: all but padding",
                      more="A recurrence over time (its class declares `causal_only`) takes `causal` only")
    window: int | None = knob(sets="window", help="a query sees the keys fewer than `window` positions away; null: "
                              "all", more="Not for the variants that form no T × T scores (their class's `rejects`)")
    position: Position = knob(sets="position", help="learned, sinusoidal: on the embeddings; rope, alibi: in attention; "
                              "none: NoPE")
    smeared_keys: bool = knob(sets="smeared_keys", help="each key mixed with the previous one (Olsson et al. 2022)",
                              more="k'_j = σ(α_h) k_j + (1 − σ(α_h)) k_{j−1}, one learned "
                              "α_h per key head (starting at 0; k_{−1} = 0; before `rope` rotates the key); for the "
                              "variants with learned keys on the queries' own sequence, refused with one line by the "
                              "others")
    mixers: list[str] | None = knob(sets="mixers", help="one variant per layer, e.g. [gated_deltanet,multihead]; null: model's",
                                    more="A [hybrid stack](#hybrid-stacks), e.g. `mixers=[gated_deltanet,multihead] "
                                    "layers=2`; with null every layer is `model`'s (its `model.options` go to its "
                                    "layers only)")
    device: Device = knob(Device.auto, help="auto: cuda, then mps, then cpu; cpu, cuda or mps: that one")
    seed: int = knob(0, help="seed of the data, the weights and the training order",
                     more="The same seed gives bit-identical metrics and weights on the same machine, torch build and "
                     "`threads` (see [What reproduces](experiments.md#what-reproduces-exactly))")
    threads: int | None = knob(1, help="torch CPU threads; null: one per core",
                               more="The models are tiny: extra threads only wait on each other")
    lr: float = knob(3e-3, help="AdamW's learning rate", more="`module.optimizer` in the config")
    weight_decay: float = knob(0.0, help="AdamW's weight decay")
    batch_size: int = knob(64, help="training examples per step", more="Validation uses at least 256")
    max_steps: int = knob(1500, help="training steps at most (early stopping ends a solved run sooner)",
                          more="See `callbacks` under [Groups](#groups-defaults-in-bold)")
    max_epochs: int | None = knob(None, help="epochs at most; null: max_steps alone bounds the run")
    # The validation's scalars are listed where they are declared (analysis/validation_metrics.py, below config's
    # floor), in the docs' table that `make docs` writes from there.
    optimized_metric: str = knob("val/seq_acc", help="the final metric the run returns (what Optuna optimises)",
                                 more="Also any other scalar of the final validation ([Validation metrics]"
                                 "(#validation-metrics); not the `val/loss_by_index/{i}` values), or a value of one "
                                 "head: `attention_entropy/layer<l>/head<h>`, `head_score/<kind>/layer<l>/head<h>`, "
                                 "`ablation/<how>/<metric>/layer<l>/head<h>` or `.../layer<l>/all`, "
                                 "`patching/logit_diff/layer<l>/head<h>` or `.../layer<l>/all` (a task with a "
                                 "corruption)")
    probe: str | None = knob(None, help="the sentence whose attention TensorBoard shows; null: the task's own",
                             more="Also what `visualize.py` shows without `--text`; the task's own probe is an input "
                             "that shows its mechanism (see [Tasks](#tasks))")
    log_attention_every_n_steps: int = knob(10, help="the probe's attention: every N steps to step 20 N, then sparser",
                                            more="10 logs per doubling of the step (with 10: steps 10, 20, …, 190, "
                                            "then 200, 220, …, 380, then 400, 440, …), and at the end; the "
                                            "`predictions` text once per doubling (10 N, 20 N, 40 N, …); "
                                            "callbacks/probe_logging.py")
    num_predictions_logged: int = knob(4, help="validation examples shown in TensorBoard's Text tab")
    ablation: list[str] | None = knob(None, help="head ablations at the end: [zero,mean]; null: both; []: none",
                                      more="Of the final validation (see [What TensorBoard shows]"
                                      "(tensorboard.md#what-tensorboard-shows)); `null` is both for every variant "
                                      "whose heads have weights (`model=simple` has none: no ablation)")
    ablation_every_validation: bool = knob(False, help="the ablations at every validation during training too",
                                           more="About 20 passes over the validation set each time")
    patching: bool = knob(True, help="activation patching at the end, where the task has a corruption; false: off",
                          more="Each head's and each layer's clean output patched into the corrupted run, "
                          "`patching/logit_diff/...` (see [Activation patching](tensorboard.md#activation-patching)); "
                          "a task without a corruption logs one info line and nothing else")
    patching_every_validation: bool = knob(False, help="the patching at every validation during training too",
                                           more="2 + (heads + 1) × layers passes over the validation set each time")
    path_patching: bool = knob(False, help="path patching at the end: each head's paths to later heads' q/k/v, logits",
                               more="`path_patching/logit_diff/layer<a>/head<i>/layer<b>/head<j>/<q|k|v>` and "
                               "`.../logits`, on activation patching's corrupted batches (see [Path patching]"
                               "(tensorboard.md#path-patching)); a model it cannot measure logs one info line")
    attribution: bool = knob(True, help="attribution patching, patching's first-order estimate, at every "
                             "validation",
                             more="`attribution/logit_diff/layer<l>/head<h>`, and `attribution/rank_corr` against "
                             "the patching where both are measured (see [Attribution patching]"
                             "(tensorboard.md#attribution-patching)); during training on the first examples of the "
                             "validation set only, unless the patching is measured then too")
    tags: list = knob([], help="free-form labels, kept in the run's .hydra/config.yaml")
    clamp: list[str] = knob([], help="heads whose output is replaced while training, e.g. [layer0/head*]; []: none",
                            more="Each `layer<l>/head<h>`, `*` for every layer or head (the layers with heads of "
                            "their own); during the steps of [clamp_from, clamp_until), in training and in every "
                            "validation then (see [Clamping heads during training]"
                            "(experiments.md#clamping-heads-during-training))")
    clamp_kind: ClampKind = knob(ClampKind.zero, help="zero: a clamped head outputs 0; mean: its mean over the batch",
                                 more="`mean`: at each position, the mean over the batch's real (non-pad) queries of "
                                 "that forward pass, detached")
    clamp_from: int = knob(0, help="the first step with the heads clamped")
    clamp_until: int | None = knob(None, help="the first step with them released; null: clamped to the end",
                                   more="A validation at step s sees the clamp when clamp_from <= s < clamp_until, "
                                   "the final one too")
    resume: str | None = knob(None, help="a run dir (or sweep dir) to continue after an interruption",
                              more="See [Interrupted runs](sweeps.md#interrupted-runs-resume)")


# In configs/, the model's fields follow the top-level knobs: model field -> the knob that sets it.
KNOB_OF_FIELD = {**{f.metadata["sets"]: f.name for f in dataclasses.fields(TrainConfig) if "sets" in f.metadata},
                 "block": "block"}
# `heads` sets model.num_heads of a variant with several heads; a single-head variant's is 1 (its class says so).
FROM_KNOBS = {**{field_name: f"${{{knob}}}" for field_name, knob in KNOB_OF_FIELD.items()},
              "num_heads": "${lab.num_heads:${.name},${heads},${mixers}}"}


def setting_name(model_field: str) -> str:
    """How a user writes a model field: its knob (``heads`` for num_heads), else ``model.<field>``."""
    return KNOB_OF_FIELD.get(model_field, f"model.{model_field}")


def block_heads(heads: Any, variant: VariantFacts | None) -> Any:
    """The heads rule: a block of a variant with several heads has ``heads``, one of a single-head variant 1 (an
    unknown variant, None, keeps ``heads``: building it fails, naming the variant)."""
    return heads if variant is None or variant.multi_head else 1


def num_heads_of(variant: str, heads: Any, mixers: Any = None) -> Any:
    """model.num_heads: the ``heads`` knob where some layer's block takes it (:func:`block_heads`; a hybrid stack's
    layers are ``mixers``), else 1."""
    names = [str(name) for name in mixers] if mixers else [str(variant)]
    layer_heads = {block_heads(heads, declared_variants(only=name).get(name)) for name in names}
    return heads if heads in layer_heads else 1


def register_configs() -> None:
    """The schema for Hydra, and the resolvers of configs/hydra/default.yaml: ``${lab.run_dir:${resume},<new>}``
    keeps a resumed run in its own dir, and ``${lab.output_subdir:${resume}}`` stops Hydra from rewriting that
    run's .hydra/ record (the task function updates it once the resumed run has started). ``--help``'s resolver is
    :func:`attention_lab.run.cli.register_help`'s. Once per process: what it registers stays (Hydra copies a stored
    node on every load), and building the schema again would cost milliseconds per composition in-process."""
    cs = ConfigStore.instance()
    if f"train{SCHEMA_SUFFIX}.yaml" in cs.list(""):
        return
    OmegaConf.register_new_resolver(
        "lab.run_dir", lambda resume, new: os.path.abspath(os.path.expanduser(str(resume))) if resume else new,
        replace=True)
    OmegaConf.register_new_resolver("lab.output_subdir", lambda resume: None if resume else ".hydra", replace=True)
    # A resumed Optuna sweep's new jobs go after the existing job dirs (the sweeper numbers each launch from 0).
    OmegaConf.register_new_resolver("lab.job_subdir", lambda num, offset: str(int(num) + int(offset)), replace=True)
    OmegaConf.register_new_resolver("lab.num_heads", num_heads_of, replace=True, use_cache=True)
    train = OmegaConf.structured(TrainConfig)
    for key, interpolation in FROM_KNOBS.items():
        train.model[key] = interpolation  # an interpolation may stand in for any typed value
    # task.options.<name>=v without a `+`: the task's class, not this schema, knows its options (checks.py).
    OmegaConf.set_struct(train.task.options, False)
    cs.store(name=f"train{SCHEMA_SUFFIX}", node=train)  # last: the check above finds it once the resolvers are too
