"""Everything that can be checked before a run dir exists, on the config Hydra composed for the run:
:class:`PreflightChecks` is the first of the Hydra callbacks (configs/train.yaml), called before Hydra creates
anything. A bad setting ends the command with one ``error: ...`` line.

- Typos, wrong types and unknown options fail for runs and sweeps alike.
- A single run is checked completely: settings, device, corpus and task data, memory. ``resume=<run dir>``: its
  record is read and checked here; the config it composes is composed once, by the task function
  (:func:`attention_lab.run.task.resumed_config`), and checked there before anything in the dir changes.
- A sweep is checked whole before its first job starts: every job it launches is composed and passes the config
  rules (:func:`attention_lab.checks.validate`), and one bad job refuses the sweep in a line that names it. A
  search (Optuna) picks its trials as it goes: each choice and each bound of its search space is checked once, in
  a trial it could ask for. A sweep whose jobs share a dir is refused (:mod:`.sweep_jobs`); combinations that
  would train the same run are folded into one job (with Hydra's basic sweeper: refused). The lab's product
  sweeper checks its own jobs (:func:`check_product_sweep`), in the compositions it makes for its plan, and then
  claims the sweep dir: each job is composed once before the sweep starts, not once for the checks and again for
  the plan.
- The arguments of the loggers and callbacks a run will build must be ones their classes name
  (:mod:`.built_arguments`): checked for a run and a resumed record, and for each job of a sweep that sets a
  logger or a callback before the sweep starts.
- What reads files or asks the machine (the corpus and task data, the device, the attention class's own option
  values) is checked in each job's task function, on the machine and at the time the job runs (a SLURM node, a
  corpus written meanwhile): such a failure fails only its own job, which the sweep summary records.

The device: the ``device`` knob (or a trainer preset's accelerator) as a Lightning accelerator
(:func:`resolve_accelerator`), resolved here and handed to ``train()`` in its RunContext.

The memory (:func:`check_fits`): the least memory a run needs, from its config, against the memory of the machine
that is to train it: a run that cannot fit is refused before its dir exists, in one line that names the setting and
what fits, instead of failing (or swapping for hours) after its data or its model was half built. Every estimate is
a lower bound, so that no run that fits is refused:

- the model's parameters, counted on PyTorch's meta device (nothing allocated), at 8 bytes each (a float32
  weight and its gradient), and 8 more for Adam's and AdamW's two moments (the lab's optimizer);
- one batch's activations: every layer keeps at least its input (batch × task.max_len × d_model float32 numbers)
  for the backward pass;
- the task's examples, in the process's memory: inputs and targets as int64, padded to task.max_len (the
  longer validation set's to task.ood_max_len). Building them in Python takes several times more.

The model and its activations live on the accelerator (a GPU's own memory; the CPU's and MPS's are the
machine's), the examples in the machine's memory.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from attention_lab.checks import attention_error, caveats, check_known_keys, check_typed_knobs, validate
from attention_lab.config import ModelConfig, TaskConfig
from attention_lab.errors import ConfigError
from attention_lab.run.built_arguments import check_built_arguments, touches_built
from attention_lab.run.cli import full_error_requested
from attention_lab.run.describe import describe
from attention_lab.run.overrides import (
    SELF_CHECKING_SWEEPERS,
    is_sweep_dir,
    override_key,
    overrides_as_typed,
    sweeper_of,
)
from attention_lab.trainer_rules import check_devices

if TYPE_CHECKING:
    from attention_lab.run.resume import ResumePlan
    from attention_lab.run.sweep_jobs import SweepPlan

T = TypeVar("T")


def accelerator_of(cfg: DictConfig) -> str:
    """The run's accelerator, from its ``device`` knob or its trainer preset's accelerator."""
    return resolve_accelerator(getattr(cfg.device, "value", cfg.device), cfg.trainer.get("accelerator"))


def check_machine_and_data(cfg: DictConfig) -> str:
    """The checks that read files or ask torch: corpus, task data, device, one block's attention built as the model
    builds it (the variant's class checks what the torch-free rules cannot: its own options' values), and whether
    the run fits in memory (:func:`check_fits`). Returns the run's accelerator."""
    import torch

    from attention_lab.attention import AttentionArgumentError
    from attention_lab.config import ModelConfig, TaskConfig, typed
    from attention_lab.data.corpus import Vocabulary, read_sentences
    from attention_lab.data.tasks import build_task
    from attention_lab.data.train_size import with_training_inputs
    from attention_lab.model import block_attention

    # train_size=null resolved as the datamodule resolves it: the tasks' checks and the memory bound read the number.
    task = with_training_inputs(typed(TaskConfig, cfg.task), cfg.get("max_steps"), int(cfg.batch_size))
    sentences = read_sentences(task.corpus)
    vocab, builder = Vocabulary.for_task(sentences, task.words, bos=task.bos), build_task(task.name)
    builder.check(vocab, sentences, task)
    builder.check_ood(vocab, sentences, task)
    accelerator = accelerator_of(cfg)
    check_devices(cfg.trainer.get("devices"), accelerator)
    model = typed(ModelConfig, OmegaConf.to_container(cfg.model, resolve=True))
    try:
        with torch.device("meta"):  # built for its checks, never run: nothing allocated, whatever d_model is
            for variant in dict.fromkeys(model.layer_variants()):  # each variant of a hybrid stack once
                block_attention(model, variant, model.layer_heads(variant))
    except AttentionArgumentError as err:
        raise attention_error(err, cfg) from err
    optimizer = str(OmegaConf.select(cfg, "module.optimizer._target_", default=""))
    check_fits(model, task, len(vocab), int(cfg.batch_size), optimizer, accelerator)
    return accelerator


def check_run(cfg: DictConfig) -> str:
    """Raises what is wrong with the run's config, data or machine; returns its accelerator."""
    validate(cfg)
    for note in caveats(cfg):
        logging.getLogger("attention_lab").warning("warning: %s", note)
    accelerator = check_machine_and_data(cfg)
    check_built_arguments(cfg)  # last: it imports the classes the run builds (the checks above import Lightning)
    return accelerator


def main_config_dir(hydra_cfg: DictConfig) -> Path:
    """The dir of the app's own configs, from Hydra's settings (``cfg.hydra``)."""
    main = next(source for source in hydra_cfg.runtime.config_sources if source.provider == "main")
    return Path(str(main.path).removeprefix("file://"))


def check_single_run(cfg: DictConfig) -> None:
    """Raises what is wrong with a single run; ``cfg`` is its config, Hydra's settings included. ``resume=<run
    dir>``: what is wrong with its record and its dir; the config the record composes is composed and checked by
    :func:`checked_resume`, once, in the task function."""
    overrides = overrides_as_typed(cfg.hydra, "task")
    if cfg.get("resume"):
        from attention_lab.run.resume import plan_resume  # a resume's checks: a plain run needs none of them

        plan = plan_resume(str(cfg.resume), overrides)
        run_dir = Path(str(cfg.hydra.run.dir)).expanduser().resolve()
        if run_dir != plan.run_dir:
            raise ConfigError(f"hydra.run.dir={run_dir} is invalid with {plan.setting}: a run continues in its "
                              "own dir; leave hydra.run.dir out")
        return
    check_typed_knobs(cfg, {override_key(o) for o in overrides})
    check_run(cfg)


def checked_resume(value: str, overrides: Sequence[str], config_name: str,
                   config_dir: Path) -> tuple[DictConfig, ResumePlan, str]:
    """``resume=<value>``: the resumed run's config, composed from its record and this command's ``overrides``
    (Hydra initialised), checked whole (the record, the config it composes, the run's settings, data and machine),
    read-only; with the plan it was composed by and the run's accelerator."""
    from attention_lab.run.resume import compose_resumed, plan_resume

    plan = plan_resume(value, overrides)
    cfg = compose_resumed(plan, config_name, config_dir)
    OmegaConf.set_readonly(cfg, True)  # as the config it replaces
    return cfg, plan, check_run(cfg)


def command_overrides(cfg: DictConfig) -> list[str]:
    """The command line's overrides, Hydra's own (hydra.sweep.subdir=...) and the task's."""
    return overrides_as_typed(cfg.hydra, "hydra", "task")


def check_sweep(cfg: DictConfig, config_name: str) -> None:
    """Raises what is wrong with any job of a sweep; ``cfg`` is the sweep's config, as Hydra composed it."""
    from attention_lab.run.sweep_jobs import sweep_job_configs  # a sweep's: a single run needs none of it

    sweep_job_configs(command_overrides(cfg), config_name, check_sweep_job, check_launched_job, sweep_config=cfg)


def check_launched_job(cfg: DictConfig) -> None:
    """The config rules of a job the sweep launches (Hydra's settings included in ``cfg``), and the arguments of its
    loggers and callbacks where its overrides set one: the project's own are imported, to read their arguments,
    only by the jobs that train (the sweep's own process stays light)."""
    validate(cfg)
    if touches_built([override_key(o) for o in overrides_as_typed(cfg.hydra, "task")]):
        check_built_arguments(cfg)


def check_product_sweep(cfg: DictConfig, jobs: list[list[str]],
                        composed: Callable[[Sequence[str]], DictConfig]) -> SweepPlan:
    """The product sweeper's plan for its combinations ``jobs``, each composed once by ``composed`` (as the
    launcher composes a job) and checked as :func:`check_sweep` checks a job; raises what is wrong with any job.
    ``cfg`` is the sweep's config."""
    from attention_lab.run.sweep_jobs import checked_product

    return checked_product(jobs, composed, check_sweep_job, check_launched_job, cfg)[0]


def check_launch(cfg: DictConfig) -> None:
    """The launcher's and the sweeper's own numbers, which their schemas type but do not bound."""
    n_jobs = OmegaConf.select(cfg, "hydra.launcher.n_jobs")
    if isinstance(n_jobs, int) and (n_jobs == 0 or n_jobs < -1):
        raise ConfigError(f"hydra.launcher.n_jobs={n_jobs} is invalid: jobs at once must be a positive number, or -1 "
                          "for one per CPU core")
    n_trials = OmegaConf.select(cfg, "hydra.sweeper.n_trials")
    if isinstance(n_trials, int) and n_trials < 1:
        raise ConfigError(f"hydra.sweeper.n_trials={n_trials} is invalid: a search needs at least one trial")


def check_sweep_job(cfg: DictConfig) -> None:
    """What every job of a sweep must pass before the sweep starts: no unknown keys, no resume."""
    check_known_keys(cfg)
    check_launch(cfg)
    if cfg.get("resume") and not is_sweep_dir(cfg.resume):  # resume=<sweep dir> relaunches a sweep
        raise ConfigError(f"resume={cfg.resume} is invalid with -m (a sweep): resume one run at a time "
                          "(a sweep job too: resume=<sweep dir>/<job number>)")


def refuse(check: Callable[[], T], overrides: Sequence[str]) -> T:
    """Runs ``check`` and returns what it returns; what it raises ends the command with one line
    (HYDRA_FULL_ERROR=1: the traceback). SystemExit, because Hydra turns an Exception in a callback into a warning
    and goes on."""
    try:
        return check()
    except Exception as err:
        if full_error_requested():
            traceback.print_exception(err)
            sys.exit(1)
        sys.exit(f"error: {describe(err, overrides)}")


class PreflightChecks(Callback):
    """The checks above, on the config Hydra composed, before any run dir or sweep dir is claimed or created."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        refuse(lambda: check_single_run(config), command_overrides(config))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        if sweeper_of(config) in SELF_CHECKING_SWEEPERS:
            return  # it checks its jobs in the compositions of its plan (check_product_sweep), then claims its dir
        refuse(lambda: check_sweep(config, str(config.hydra.job.config_name)), command_overrides(config))


FLOAT_BYTES = 4
# The float32 numbers an optimizer keeps per parameter (Adam's exp_avg and exp_avg_sq); any other: none counted.
OPTIMIZER_STATES = {"torch.optim.AdamW": 2, "torch.optim.Adam": 2}
TOKEN_BYTES = 8  # int64 ids
GB = 1e9


@dataclass(frozen=True)
class ParameterCount:
    """The model's parameters as ``fixed + per_layer × layers + per_word × vocabulary size`` (exact: the model is
    linear in both)."""

    fixed: int
    per_layer: int
    per_word: int

    def total(self, layers: int, vocab_size: int) -> int:
        return self.fixed + self.per_layer * layers + self.per_word * vocab_size


def count_parameters(model: ModelConfig) -> ParameterCount:
    """The parameters of the model ``model`` describes, from three small copies built on the meta device."""
    import torch

    from attention_lab.model import SequenceModel

    def count(layers: int, vocab_size: int) -> int:
        with torch.device("meta"):
            built = SequenceModel(replace(model, layers=layers), vocab_size)
        return sum(p.numel() for p in built.parameters())

    base = count(1, 1)
    per_layer, per_word = count(2, 1) - base, count(1, 2) - base
    return ParameterCount(base - per_layer - per_word, per_layer, per_word)


def machine_memory() -> int:
    """Bytes of memory this machine has (all of it, not what is free now: the bound must not depend on the load)."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def gpu_memory() -> int:
    """Bytes of memory of the smallest visible GPU: under data parallelism each holds a whole copy of the model."""
    import torch

    return min(torch.cuda.get_device_properties(i).total_memory for i in range(torch.cuda.device_count()))


def gigabytes(size: float) -> str:
    return f"{size / GB:,.1f} GB"


def example_bytes(task: TaskConfig) -> int:
    """The task's examples as the data module holds them (inputs and targets, padded)."""
    positions = task.max_len * (task.train_size + task.val_size)
    if task.ood_min_len is not None and task.ood_max_len is not None:
        positions += task.ood_max_len * task.val_size
    return 2 * TOKEN_BYTES * positions


def check_data_fits(task: TaskConfig, memory: int) -> None:
    need = example_bytes(task)
    if need <= memory:
        return
    key, value = ("task.train_size", task.train_size) if task.train_size >= task.val_size else ("task.val_size",
                                                                                               task.val_size)
    fitting = memory // (2 * TOKEN_BYTES * task.max_len)
    raise ConfigError(f"{key}={value} is invalid: the examples (task.train_size + task.val_size = "
                      f"{task.train_size + task.val_size}, task.max_len={task.max_len}) take at least {gigabytes(need)} "
                      f"as tensors, more than this machine's {gigabytes(memory)} of memory; at most about {fitting} "
                      "examples fit")


def bytes_per_parameter(optimizer: str) -> int:
    """What training keeps per parameter with the optimizer ``optimizer`` (its ``_target_``)."""
    return FLOAT_BYTES * (2 + OPTIMIZER_STATES.get(optimizer, 0))


def check_model_fits(model: ModelConfig, vocab_size: int, batch_size: int, task: TaskConfig, per_parameter: int,
                     memory: int, where: str) -> None:
    """``per_parameter``: bytes per parameter (:func:`bytes_per_parameter`); ``memory``: the bytes ``where`` (a phrase:
    "the GPU has") holds for the model and its activations."""
    counted = count_parameters(model)
    batch = min(batch_size, task.train_size)  # a batch is at most the training set
    per_layer_weights = per_parameter * counted.per_layer
    per_layer_activations = FLOAT_BYTES * batch * task.max_len * model.d_model
    fixed = per_parameter * (counted.fixed + counted.per_word * vocab_size)
    need = fixed + (per_layer_weights + per_layer_activations) * model.layers
    if need <= memory:
        return
    what = (f"the model ({counted.total(model.layers, vocab_size):.3g} parameters, at {per_parameter} bytes each to "
            f"train) and one batch's activations take at least {gigabytes(need)}, more than the {gigabytes(memory)} "
            f"{where}")
    fitting_layers = (memory - fixed) // (per_layer_weights + per_layer_activations)
    if fitting_layers < 1:
        raise ConfigError(f"d_model={model.d_model} is invalid: not even one layer fits: {what}; use a smaller "
                          "d_model")
    if per_layer_activations > per_layer_weights:
        raise ConfigError(f"batch_size={batch_size} is invalid with layers={model.layers}: {what}; at most "
                          f"{fitting_layers} layers fit at this batch_size, or use a smaller one")
    raise ConfigError(f"layers={model.layers} is invalid: {what}; at most {fitting_layers} layers fit at "
                      f"d_model={model.d_model}")


def check_fits(model: ModelConfig, task: TaskConfig, vocab_size: int, batch_size: int, optimizer: str,
               accelerator: str) -> None:
    """Raises ConfigError when the run cannot fit in memory; the examples are checked first (the model needs them
    built). ``optimizer``: the ``_target_`` of the run's optimizer."""
    memory = machine_memory()
    check_data_fits(task, memory)
    sizes = (model, vocab_size, batch_size, task, bytes_per_parameter(optimizer))
    if accelerator == "gpu":
        check_model_fits(*sizes, gpu_memory(), "the GPU has")
    else:  # the model shares the machine's memory with the examples
        check_model_fits(*sizes, memory - example_bytes(task), "this machine has beside the examples")


def resolve_accelerator(device: str, preset: str | None = None) -> str:
    """The `device` knob (or a trainer preset's accelerator) as a Lightning accelerator; fails early when the
    hardware isn't there. Imports torch only when a device is named."""
    if preset is None and device == "auto":
        import torch

        if torch.cuda.is_available():
            return "gpu"
        return "mps" if torch.backends.mps.is_available() else "cpu"
    import torch

    wanted, setting = (preset, f"trainer.accelerator={preset}") if preset else (device, f"device={device}")
    instead = "use trainer=default (device=auto) or trainer=cpu" if preset else "use device=cpu or device=auto"
    if wanted in ("gpu", "cuda") and not torch.cuda.is_available():
        raise ConfigError(f"{setting} is invalid: no CUDA GPU is visible to torch here; {instead}")
    if wanted == "mps" and not torch.backends.mps.is_available():
        raise ConfigError(f"{setting} is invalid: Apple's MPS backend is not available here; {instead}")
    return {"cpu": "cpu", "cuda": "gpu", "gpu": "gpu", "mps": "mps"}.get(str(wanted), str(wanted))
