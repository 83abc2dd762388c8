"""Checks of a composed config that its types cannot express, each failure a ConfigError of one line naming the
setting and what is allowed. No torch import (:mod:`attention_lab.run.preflight` has the checks that need the
machine or the data), except that an accelerator or strategy the config names is checked against Lightning's own
registries (:mod:`attention_lab.trainer_rules`).

The variant's rules are the attention package's (:mod:`attention_lab.attention.arguments`), applied to what its
class declares (read without torch: :mod:`attention_lab.attention.declared`), their errors' fields made the line."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from omegaconf import DictConfig, OmegaConf

from attention_lab.analysis.clamp import check_clamp
from attention_lab.analysis.tags import (
    ABLATION_METRICS,
    ABLATIONS,
    ATTRIBUTION,
    ENTROPY,
    HEAD_SCORE_KINDS,
    PATCHING,
    HeadMetric,
)
from attention_lab.analysis.validation_metrics import OOD, measured_tags
from attention_lab.attention.arguments import (
    CAUSAL_ONLY_REASON,
    accepts_bidirectional,
    accepts_causal,
    accepts_smeared_keys,
    check_dropout,
    check_heads_divide,
    check_kv_heads,
    check_options,
    check_position,
    check_rejected,
    check_rope_head_dim,
    check_single_head,
    check_smeared_keys,
    check_window,
)
from attention_lab.attention.declared import NamesWhere, VariantFacts, declared_variants
from attention_lab.attention.errors import AttentionArgumentError
from attention_lab.config import ALL_MASKS, Mask, Position, TaskConfig, block_heads, setting_name
from attention_lab.data.corpus import tokenize
from attention_lab.data.tasks import build_task
from attention_lab.data.tasks.base import TASK_REGISTRY, check_ood_range, option_hint
from attention_lab.data.train_size import check_train_size
from attention_lab.errors import ConfigError
from attention_lab.names import did_you_mean
from attention_lab.trainer_rules import check_trainer_names

# The longest positional table: the tasks' sequences are short, and 10**9 positions would allocate ~190 GB.
MAX_CONTEXT_LENGTH = 4096


def validate(cfg: DictConfig) -> None:
    """Every check that needs nothing but the config."""
    check_known_keys(cfg)
    check_task_options(cfg)
    check_sizes(cfg)
    variant = variant_of(cfg)
    for who, layer_variant in layer_variants(cfg, variant):
        check_model(cfg, layer_variant, who)
        check_masks(cfg, layer_variant, who)
    check_ablation(cfg, variant)
    check_patching(cfg)
    check_clamp(cfg)
    check_optimized_metric(cfg, variant)
    check_trainer(cfg)


def variant_of(cfg: DictConfig) -> VariantFacts:
    """What the chosen attention variant declares."""
    name = str(cfg.model.name)
    variant = declared_variants(only=name).get(name)
    if variant is None:
        raise ConfigError(f"model.name={name} is invalid: choose one of {', '.join(sorted(declared_variants()))}")
    return variant


def layer_variants(cfg: DictConfig, variant: VariantFacts) -> list[tuple[str, VariantFacts]]:
    """(how an error names it, its facts) of each distinct variant of the stack: ``model=<name>``, or with a hybrid
    stack (``mixers``) ``mixers[<layer>]=<name>`` at its first layer. A mixers list that is not one registered,
    self-attending variant per layer is an error."""
    mixers = cfg.model.get("mixers")
    if not mixers:
        return [(f"model={variant.name}", variant)]
    if not OmegaConf.is_list(mixers):
        raise ConfigError(f"model.mixers={mixers} is invalid: it must be a list of variant names, one per layer "
                          "(e.g. mixers=[gated_deltanet,multihead] layers=2), or null")
    shown = f"mixers=[{','.join(str(name) for name in mixers)}]"
    if len(mixers) != cfg.model.layers:
        raise ConfigError(f"{shown} is invalid: it names {len(mixers)} variants for layers={cfg.model.layers}; "
                          "give one per layer (or set layers to its length)")
    if variant.takes_source:
        raise ConfigError(f"{shown} is invalid for model={variant.name}: an encoder-decoder's blocks take a source; "
                          "a hybrid stack is of self-attending variants (e.g. model=multihead)")
    found: dict[str, tuple[str, VariantFacts]] = {}
    for layer, name in enumerate(str(name) for name in mixers):
        facts = declared_variants(only=name).get(name)
        if facts is None:
            known = declared_variants()
            raise ConfigError(f"mixers[{layer}]={name} is invalid: it is not an attention variant"
                              f"{did_you_mean(name, known)} (choose among {', '.join(sorted(known))})")
        if facts.takes_source:
            raise ConfigError(f"mixers[{layer}]={name} is invalid: it attends to a second sequence, which a layer of "
                              "a hybrid stack does not have; choose a self-attending variant")
        found.setdefault(name, (f"mixers[{layer}]={name}", facts))
    single = [who for who, facts in found.values() if not facts.multi_head]
    if single and len(single) < len(found) and cfg.model.num_heads > 1:
        raise ConfigError(f"{single[0]} is invalid with heads={cfg.model.num_heads}: it has one head, and every "
                          "layer of a stack has as many heads (the maps are layers x heads); use heads=1 or a "
                          "multi-head variant")
    return list(found.values())


def variant_error(err: AttentionArgumentError, variant: VariantFacts, setting: str = "", who: str = "") -> ConfigError:
    """An attention rule's error as one line, under the setting's name as written (``who``: the variant as chosen)."""
    setting = setting or setting_name(err.argument)
    shown = "null" if err.value is None else str(err.value).lower() if isinstance(err.value, bool) else err.value
    reason = f" ({err.reason})" if err.reason else ""
    return ConfigError(f"{setting}={shown} is invalid for {who or f'model={variant.name}'}: it must be "
                       f"{err.allowed}{reason}")


def attention_error(err: AttentionArgumentError, cfg: DictConfig) -> ConfigError:
    """A rule that only the variant's class applies (its own options' values: sigmoid's score_bias), as one line."""
    own = err.argument in (cfg.model.get("options") or {})
    return variant_error(err, variant_of(cfg), setting=f"model.options.{err.argument}" if own else "")


def check_typed_knobs(cfg: DictConfig, typed: set[str]) -> None:
    """A knob typed on a single run's command line that its variant cannot use is an error, never ignored:
    ``model=self heads=3`` would train one head. (A sweep's job is a composed config: the job ``model=self heads=2``
    trains what ``model=self heads=1`` trains, and the sweep folds the two.)"""
    if "heads" in typed and cfg.get("heads") is not None:  # heads=null (removed) fails in check_sizes
        variant = variant_of(cfg)
        if any(facts.multi_head for facts in stack_facts(cfg, variant)):
            return
        try:
            check_single_head(variant.name, variant, cfg.heads, NamesWhere("multi_head"))
        except AttentionArgumentError as err:
            raise variant_error(err, variant) from err


def caveats(cfg: DictConfig) -> list[str]:
    """Settings that run but deserve a word: they are experiments, not mistakes."""
    notes = []
    if Position(cfg.model.position) is Position.none and Mask(cfg.model.mask) is not Mask.causal:
        notes.append(f"position=none with mask={Mask(cfg.model.mask).value}: without positions or a causal mask, attention "
                     "cannot tell the order of the words apart (NoPE works through the causal mask)")
    return notes


def check_known_keys(node: Any, prefix: str = "") -> None:
    """`+haeds=3` adds a key that no schema declares: an error, with the closest declared name."""
    if not isinstance(node, DictConfig):
        return
    schema = OmegaConf.get_type(node)
    if dataclasses.is_dataclass(schema):
        fields = [f.name for f in dataclasses.fields(schema)]
        for key in node.keys():
            if key not in fields and key != "hydra":
                hint = (option_hint(str(key)) if schema is TaskConfig else "") or did_you_mean(
                    str(key), fields, prefix, cutoff=0.4)
                raise ConfigError(f"+{prefix}{key} is invalid: there is no setting '{prefix}{key}'{hint} "
                                  "(python scripts/train.py --help lists them)")
    for key in node.keys():
        if key != "hydra" and not OmegaConf.is_interpolation(node, key):
            check_known_keys(node.get(key), f"{prefix}{key}.")


def check_task_options(cfg: DictConfig) -> None:
    """task.options: only the options the task's class declares, each of its declared type (data/tasks/base.py)."""
    build_task(str(cfg.task.name)).options_of(cfg.task)


def positive(key: str, value: Any, *, optional: bool = False) -> None:
    if value is None and optional:
        return
    if value is None or isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        shown = "null" if value is None else value
        raise ConfigError(f"{key}={shown} is invalid: it must be a positive integer")


def check_sizes(cfg: DictConfig) -> None:
    model, task = cfg.model, cfg.task
    for key in ("heads", "d_model", "layers", "batch_size", "max_steps", "log_attention_every_n_steps"):
        positive(key, cfg.get(key))
    for key, value in (("model.context_length", model.context_length), ("task.min_len", task.min_len),
                       ("task.max_len", task.max_len), ("task.val_size", task.val_size),
                       ("block.mlp_ratio", model.block.mlp_ratio)):
        positive(key, value)
    for key in ("num_heads", "d_model", "layers"):
        positive(f"model.{key}", model[key])
    positive("max_epochs", cfg.get("max_epochs"), optional=True)
    check_train_size(task.train_size, cfg.get("max_epochs"))
    positive("threads", cfg.get("threads"), optional=True)
    if (cfg.get("num_predictions_logged") or 0) < 0:
        raise ConfigError(f"num_predictions_logged={cfg.num_predictions_logged} is invalid: it must be >= 0")
    seed = cfg.get("seed")
    if seed is None or not 0 <= seed < 2**32:
        raise ConfigError(f"seed={seed} is invalid: it must be an integer in [0, 2**32)")
    if model.context_length > MAX_CONTEXT_LENGTH:
        raise ConfigError(f"model.context_length={model.context_length} is invalid: it must be at most "
                          f"{MAX_CONTEXT_LENGTH} (positions in the table; the tasks' sequences are far shorter)")
    if cfg.get("probe") is not None and not tokenize(str(cfg.probe)):
        raise ConfigError(f"probe={cfg.probe!r} is invalid: it must contain at least one word (the sentence whose "
                          "attention maps TensorBoard shows), or be null for the task's own probe")
    if task.min_len > task.max_len:
        raise ConfigError(f"task.min_len={task.min_len} is invalid: it must be <= task.max_len={task.max_len}")
    bos = int(bool(task.get("bos")))  # task.bos=true: one more position, the <bos> before every input
    with_bos = " plus task.bos's <bos>" if bos else ""
    if task.max_len + bos > model.context_length:
        raise ConfigError(f"task.max_len={task.max_len} is invalid: sequences{with_bos} longer than the positional table "
                          f"(model.context_length={model.context_length}) cannot be embedded; raise model.context_length "
                          f"to {task.max_len + bos}")
    if check_ood_range(task) and task.ood_max_len + bos > model.context_length:
        raise ConfigError(f"task.ood_max_len={task.ood_max_len} is invalid: sequences longer than the positional "
                          f"table (model.context_length={model.context_length}) cannot be embedded; raise "
                          "model.context_length")
    lr = cfg.get("lr")
    if lr is None or not 0 < lr < math.inf:
        raise ConfigError(f"lr={lr} is invalid: the learning rate must be a finite number > 0")
    weight_decay = cfg.get("weight_decay")
    if weight_decay is None or not 0 <= weight_decay < math.inf:
        raise ConfigError(f"weight_decay={weight_decay} is invalid: it must be a finite number >= 0")


def check_model(cfg: DictConfig, variant: VariantFacts, who: str = "") -> None:
    """The attention package's rules on the model's settings (the same functions build_attention applies), for
    the blocks of ``variant`` (``who``: how errors name it). kv_heads and model.options go to the blocks of
    model's own variant only (see attention_lab.model.block_attention)."""
    model = cfg.model
    name, d_model = variant.name, model.d_model
    num_heads = block_heads(model.num_heads, variant)
    own = name == str(model.name)
    position = Position(model.position).value
    try:
        check_dropout(model.dropout)
        check_heads_divide(name, num_heads, d_model, width_name="d_model", heads_name="heads")
        if own:
            check_kv_heads(name, variant, num_heads, model.kv_heads, NamesWhere("grouped_kv"), heads_name="heads",
                           unset_unless_grouped=True)
        check_position(name, variant, position)
        check_rope_head_dim(name, position, d_model // num_heads)  # every variant's head is d_model / heads wide
        check_window(model.window)
        check_rejected(name, variant, window=model.window, dropout=model.dropout)
        check_smeared_keys(name, variant, bool(model.get("smeared_keys")), NamesWhere(accepts_smeared_keys))
    except AttentionArgumentError as err:
        raise variant_error(err, variant, who=who) from err
    if not own:
        return
    try:
        check_options(name, variant, model.options)
    except AttentionArgumentError as err:
        raise variant_error(err, variant, setting=f"model.options.{err.argument}", who=who) from err


def check_masks(cfg: DictConfig, variant: VariantFacts, who: str = "") -> None:
    """The mask must suit both the variant and the task (``task.masks``); ``who``: how errors name the variant."""
    model, task = cfg.model, cfg.task
    who = who or f"model={model.name}"
    model_masks = [m for m in ALL_MASKS
                   if (accepts_causal(variant) if m == Mask.causal.value else accepts_bidirectional(variant))]
    mask = Mask(model.mask).value
    if mask not in task.masks:
        raise ConfigError(f"mask={mask} is invalid for task={task.name}: each position would see what it must "
                          f"predict; use mask={' or '.join(task.masks)}")
    if mask not in model_masks:
        if not set(task.masks) & set(model_masks):
            raise ConfigError(f"task={task.name} is invalid for {who}: the task needs "
                              f"mask={' or '.join(task.masks)}, which {who} does not take "
                              f"(it takes mask={' or '.join(model_masks)})")
        why = f" ({CAUSAL_ONLY_REASON})" if variant.causal_only else ""
        raise ConfigError(f"mask={mask} is invalid for {who}: use mask={' or '.join(model_masks)}{why}")


def stack_facts(cfg: DictConfig, variant: VariantFacts) -> list[VariantFacts]:
    """The facts of every layer's variant: ``variant`` alone, or a hybrid stack's (``mixers``) registered ones."""
    names = {str(name) for name in cfg.model.get("mixers") or ()}
    found = [declared_variants(only=name).get(name) for name in sorted(names)]
    return [facts for facts in found if facts is not None] or [variant]


def learned_heads(cfg: DictConfig, variant: VariantFacts) -> bool:
    """Some layer's heads have weights of their own (ModelConfig.learned_heads)."""
    return any(facts.learned_heads for facts in stack_facts(cfg, variant))


def ablations(cfg: DictConfig, variant: VariantFacts) -> tuple[str, ...]:
    """The ablations the run measures: ``ablation=null`` is every kind for a variant whose heads have weights."""
    chosen = cfg.get("ablation")
    if chosen is None:
        return ABLATIONS if learned_heads(cfg, variant) else ()
    return tuple(str(how) for how in chosen)


def check_ablation(cfg: DictConfig, variant: VariantFacts) -> None:
    chosen = cfg.get("ablation")
    shown = "null" if chosen is None else f"[{','.join(str(how) for how in chosen)}]"
    unknown = [str(how) for how in chosen or () if str(how) not in ABLATIONS]
    if unknown:
        raise ConfigError(f"ablation={shown} is invalid: {unknown[0]} is not an ablation; choose among "
                          f"{', '.join(ABLATIONS)} (e.g. ablation=[zero,mean]), [] for none or null for all")
    asked = bool(chosen) or bool(cfg.get("ablation_every_validation"))
    if asked and not learned_heads(cfg, variant):
        setting = f"ablation={shown}" if chosen else "ablation_every_validation=true"
        mixers = cfg.model.get("mixers")
        who = f"mixers=[{','.join(str(name) for name in mixers)}]" if mixers else f"model={cfg.model.name}"
        raise ConfigError(f"{setting} is invalid for {who}: its attention has no weights of its own, "
                          "so it has no learned heads to switch off; leave ablation=null and "
                          "ablation_every_validation=false, or choose a variant with weights (e.g. model=self)")
    if cfg.get("ablation_every_validation") and chosen is not None and not chosen:
        raise ConfigError("ablation_every_validation=true is invalid with ablation=[]: no ablation to run; "
                          "set ablation=null (all) or e.g. ablation=[zero]")


def patches(cfg: DictConfig, knob: str = "patching") -> bool:
    """Whether the run patches activations (``knob``: or attributes them) where the task declares a corruption."""
    task = TASK_REGISTRY.get(str(cfg.task.get("name")))
    return bool(cfg.get(knob, True)) and task is not None and task.has_corruption()


def check_patching(cfg: DictConfig) -> None:
    if cfg.get("patching_every_validation") and not cfg.get("patching", True):
        raise ConfigError("patching_every_validation=true is invalid with patching=false: no patching to run; "
                          "set patching=true or patching_every_validation=false")


def layer_learns(cfg: DictConfig, variant: VariantFacts, layer: int) -> bool:
    mixers = cfg.model.get("mixers")  # a hybrid stack's layer without learned heads is neither ablated nor patched
    name = str(mixers[layer]) if mixers else variant.name
    return declared_variants(only=name)[name].learned_heads


def per_head_metric_allowed(cfg: DictConfig, record: HeadMetric, variant: VariantFacts) -> bool:
    """Whether the run logs this per-head measurement."""
    model = cfg.model
    if record.layer >= model.layers or (record.head is not None and record.head >= model.num_heads):
        return False
    if record.family.startswith("head_score/"):
        return not variant.takes_source
    if record.family.startswith("ablation/"):
        return layer_learns(cfg, variant, record.layer) and record.family.split("/")[1] in ablations(cfg, variant)
    if record.family in (PATCHING, ATTRIBUTION):
        # the family's first word is its knob: patching/logit_diff, `patching`; attribution/logit_diff, `attribution`
        return layer_learns(cfg, variant, record.layer) and patches(cfg, record.family.split("/")[0])
    return True


def check_optimized_metric(cfg: DictConfig, variant: VariantFacts) -> None:
    """What train.py returns to a sweeper must be a metric the run measures."""
    metric = str(cfg.get("optimized_metric"))
    record = HeadMetric.parse(metric)
    ood = cfg.task.get("ood_min_len") is not None
    scalars = measured_tags(str(cfg.task.name), ood=ood)  # the scalars the module logs (analysis.validation_metrics)
    if metric in scalars:
        return
    if record is not None and per_head_metric_allowed(cfg, record, variant):
        return
    ood_note = "" if ood else f" ({OOD}/* needs task.ood_min_len and task.ood_max_len)"
    scores = "" if variant.takes_source else f", head_score/<{'|'.join(HEAD_SCORE_KINDS)}>/layer<l>/head<h>"
    hows = ablations(cfg, variant)
    ablation = (f", ablation/<{'|'.join(hows)}>/<{'|'.join(ABLATION_METRICS)}>/layer<l>/<head<h>|all>"
                if hows else "")
    if patches(cfg):
        ablation += f", {PATCHING}/layer<l>/<head<h>|all>"
    ablation += f", {ATTRIBUTION}/layer<l>/head<h>" if patches(cfg, "attribution") else ""
    raise ConfigError(f"optimized_metric={metric} is invalid: choose one of {', '.join(scalars)}, "
                      f"{ENTROPY}/layer<l>/head<h>{scores}{ablation}, with l < layers={cfg.model.layers} and "
                      f"h < heads={cfg.model.num_heads}{ood_note}")


def check_trainer(cfg: DictConfig) -> None:
    """The Trainer arguments that Lightning would only reject after training started (or never)."""
    trainer = cfg.trainer
    devices = trainer.get("devices")
    if not (devices == "auto" or devices == -1 or (isinstance(devices, int) and not isinstance(devices, bool)
                                                   and devices > 0) or OmegaConf.is_list(devices) and len(devices)):
        raise ConfigError(f"trainer.devices={devices} is invalid: use a positive number of devices, -1 (all), "
                          "auto, or a list of device indices")
    interval = trainer.get("val_check_interval")
    if interval is not None and (isinstance(interval, bool) or not isinstance(interval, (int, float)) or interval <= 0):
        raise ConfigError(f"trainer.val_check_interval={interval} is invalid: use a positive number of steps "
                          "(or a fraction of an epoch in (0, 1])")
    if isinstance(interval, float) and interval > 1:
        raise ConfigError(f"trainer.val_check_interval={interval} is invalid: a fraction of an epoch is at most 1.0")
    positive("trainer.log_every_n_steps", trainer.get("log_every_n_steps"), optional=True)
    positive("trainer.check_val_every_n_epoch", trainer.get("check_val_every_n_epoch"), optional=True)
    max_epochs = trainer.get("max_epochs")
    if max_epochs is not None and (not isinstance(max_epochs, int) or max_epochs < -1 or max_epochs == 0):
        raise ConfigError(f"trainer.max_epochs={max_epochs} is invalid: use a positive number, -1 (no limit) or null")
    max_steps = trainer.get("max_steps")
    if max_steps is not None and (not isinstance(max_steps, int) or max_steps < -1 or max_steps == 0):
        raise ConfigError(f"trainer.max_steps={max_steps} is invalid: use a positive number or -1 (no limit)")
    check_trainer_names(trainer)  # last: the only check that may import Lightning
