"""Everything that can be checked before a run dir exists, on the config Hydra composed for the run:
:class:`PreflightChecks` is the first of the Hydra callbacks (configs/train.yaml), called before Hydra creates
anything. A bad setting ends the command with one ``error: ...`` line.

- Typos, wrong types and unknown options fail for runs and sweeps alike.
- A single run is checked completely: settings, device, corpus and task data, and ``resume=``.
- A sweep is checked whole before its first job starts: every job it launches is composed and passes the config
  rules (:func:`attention_lab.checks.validate`), and one bad job refuses the sweep in a line that names it. A
  search (Optuna) picks its trials as it goes: each choice and each bound of its search space is checked once, in
  a trial it could ask for. A sweep whose jobs share a dir is refused (:mod:`.sweep_jobs`); combinations that
  would train the same run are folded into one job (with Hydra's basic sweeper: refused).
- What reads files or asks the machine (the corpus and task data, the device, the attention class's own option
  values) is checked in each job's task function, on the machine and at the time the job runs (a SLURM node, a
  corpus written meanwhile): such a failure fails only its own job, which the sweep summary records.
"""

from __future__ import annotations

import logging
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from hydra.experimental.callback import Callback
from omegaconf import DictConfig, OmegaConf

from attention_lab.checks import attention_error, caveats, check_known_keys, check_typed_knobs, validate
from attention_lab.errors import ConfigError
from attention_lab.run import resume as resuming
from attention_lab.run import sweep_resume
from attention_lab.run.describe import describe
from attention_lab.run.device import resolve_accelerator
from attention_lab.run.overrides import override_key
from attention_lab.run.sweep_jobs import sweep_job_configs
from attention_lab.run.tracebacks import full_error_requested


def check_machine_and_data(cfg: DictConfig) -> None:
    """The checks that read files or ask torch: corpus, task data, device, one block's attention built as the model
    builds it (the variant's class checks what the torch-free rules cannot: its own options' values), and whether
    the run fits in memory (:mod:`attention_lab.run.footprint`)."""
    import torch

    from attention_lab.attention import AttentionArgumentError
    from attention_lab.config import ModelConfig, TaskConfig, typed
    from attention_lab.data.corpus import Vocabulary, read_sentences
    from attention_lab.data.tasks import build_task
    from attention_lab.model import block_attention
    from attention_lab.run.footprint import check_fits

    task = typed(TaskConfig, cfg.task)
    sentences = read_sentences(task.corpus)
    vocab, builder = Vocabulary.for_task(sentences, task.words, bos=task.bos), build_task(task.name)
    builder.check(vocab, sentences, task)
    builder.check_ood(vocab, sentences, task)
    accelerator = resolve_accelerator(getattr(cfg.device, "value", cfg.device), cfg.trainer.get("accelerator"))
    model = typed(ModelConfig, OmegaConf.to_container(cfg.model, resolve=True))
    try:
        with torch.device("meta"):  # built for its checks, never run: nothing allocated, whatever d_model is
            for variant in dict.fromkeys(model.layer_variants()):  # each variant of a hybrid stack once
                block_attention(model, variant, model.layer_heads(variant))
    except AttentionArgumentError as err:
        raise attention_error(err, cfg) from err
    optimizer = str(OmegaConf.select(cfg, "module.optimizer._target_", default=""))
    check_fits(model, task, len(vocab), int(cfg.batch_size), optimizer, accelerator)


def check_run(cfg: DictConfig) -> None:
    validate(cfg)
    for note in caveats(cfg):
        logging.getLogger("attention_lab").warning("warning: %s", note)
    check_machine_and_data(cfg)


def main_config_dir(hydra_cfg: DictConfig) -> Path:
    """The dir of the app's own configs, from Hydra's settings (``cfg.hydra``)."""
    main = next(source for source in hydra_cfg.runtime.config_sources if source.provider == "main")
    return Path(str(main.path).removeprefix("file://"))


def check_single_run(cfg: DictConfig, config_name: str) -> None:
    """Raises what is wrong with a single run; ``cfg`` is its config, Hydra's settings included."""
    overrides = [str(o) for o in cfg.hydra.overrides.task]
    if cfg.get("resume"):
        plan = resuming.plan_resume(str(cfg.resume), overrides)
        run_dir = Path(str(cfg.hydra.run.dir)).expanduser().resolve()
        if run_dir != plan.run_dir:
            raise ConfigError(f"hydra.run.dir={run_dir} is invalid with {plan.setting}: a run continues in its "
                              "own dir; leave hydra.run.dir out")
        cfg = resuming.compose_resumed(plan, config_name, main_config_dir(cfg.hydra))
    else:
        check_typed_knobs(cfg, {override_key(o) for o in overrides})
    check_run(cfg)


def command_overrides(cfg: DictConfig) -> list[str]:
    """The command line's overrides, Hydra's own (hydra.sweep.subdir=...) and the task's."""
    return [str(o) for o in [*cfg.hydra.overrides.hydra, *cfg.hydra.overrides.task]]


def check_sweep(cfg: DictConfig, config_name: str) -> None:
    """Raises what is wrong with any job of a sweep; ``cfg`` is the sweep's config, as Hydra composed it."""
    sweep_job_configs(command_overrides(cfg), config_name, check_sweep_job, validate, sweep_config=cfg)


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
    if cfg.get("resume") and not sweep_resume.is_sweep_dir(cfg.resume):  # resume=<sweep dir> relaunches a sweep
        raise ConfigError(f"resume={cfg.resume} is invalid with -m (a sweep): resume one run at a time "
                          "(a sweep job too: resume=<sweep dir>/<job number>)")


def refuse(check: Callable[[], None], overrides: Sequence[str]) -> None:
    """Runs ``check``; what it raises ends the command with one line (HYDRA_FULL_ERROR=1: the traceback).
    SystemExit, because Hydra turns an Exception in a callback into a warning and goes on."""
    try:
        check()
    except Exception as err:
        if full_error_requested():
            traceback.print_exception(err)
            sys.exit(1)
        sys.exit(f"error: {describe(err, overrides)}")


class PreflightChecks(Callback):
    """The checks above, on the config Hydra composed, before any run dir or sweep dir is claimed or created."""

    def on_run_start(self, config: DictConfig, **kwargs: Any) -> None:
        refuse(lambda: check_single_run(config, str(config.hydra.job.config_name)), command_overrides(config))

    def on_multirun_start(self, config: DictConfig, **kwargs: Any) -> None:
        refuse(lambda: check_sweep(config, str(config.hydra.job.config_name)), command_overrides(config))
