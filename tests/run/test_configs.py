"""Every configuration a user can pick composes; the ones that cannot work fail before training with one
line naming the setting; typos and wrong types fail at compose time. No training here: in-process
composition (and, for accepted combinations, one forward pass of the model they build)."""

from __future__ import annotations

import itertools
import os
import stat
from pathlib import Path

import pytest
import torch
from hydra.errors import ConfigCompositionException
from omegaconf import OmegaConf

from attention_lab.attention import ATTENTION_REGISTRY, VARIANTS
from attention_lab.attention.hooks import capture
from attention_lab.checks import validate
from attention_lab.config import Mask
from attention_lab.data.tasks import TASK_REGISTRY
from attention_lab.errors import ConfigError
from conftest import CONFIG_DIR, compose_config

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def options(group: str) -> list[str]:
    """The choices of a config group, as `python scripts/train.py --help` lists them (schemas excluded)."""
    return sorted(p.stem for p in (CONFIG_DIR / group).glob("*.yaml"))


MODELS = options("model")
TASK_NAMES = options("task")
MASKS = [m.value for m in Mask]


def task_masks(task: str) -> list[str]:
    """The masks a task can be learned with: its yaml's `masks`, else every mask (TaskConfig's default)."""
    return list(OmegaConf.load(CONFIG_DIR / "task" / f"{task}.yaml").get("masks", MASKS))


TASK_MASKS = {task: task_masks(task) for task in TASK_NAMES}


def model_masks(model: str) -> list[str]:
    """The masks a variant takes, from what its class declares: a causal mask compares positions of one sequence
    (not an encoder-decoder's, takes_source); a recurrence (causal_only) reads only the positions before."""
    facts = ATTENTION_REGISTRY[model]
    return [m for m in MASKS if (not facts.takes_source if m == "causal" else not facts.causal_only)]


def expected_rejection(model: str, task: str, mask: str) -> tuple[str, str] | None:
    """How the one line of a combination that cannot work starts, and the rule it stands for (the task's masks,
    checked first; a task whose masks the variant takes none of; the variant's masks), or None: accepted."""
    if mask not in TASK_MASKS[task]:
        return f"mask={mask} is invalid for task={task}", "task_masks"
    if mask not in model_masks(model):
        if not set(TASK_MASKS[task]) & set(model_masks(model)):
            return f"task={task} is invalid for model={model}", "no_mask_in_common"
        return f"mask={mask} is invalid for model={model}", "variant_masks"
    return None


COMBINATIONS = list(itertools.product(MODELS, TASK_NAMES, MASKS))


def rows() -> tuple[list[tuple[str, str, str]], list[tuple[str, str, str]]]:
    """One row per distinct rule or code path, not the whole product: accepted, each task once (its composition
    and a model built from it), with each mask in turn and the variants taking turns (each variant's forward pass
    under each mask it takes: tests/attention/test_variant_configs.py); rejected, each rule once per what it names: the task's
    masks per task, the variant's per variant. The values a rule does not branch on take turns."""
    accepted, rejected, groups = [], [], {}
    for n, task in enumerate(TASK_NAMES):
        masks = [k for k in MASKS if any(expected_rejection(m, task, k) is None for m in MODELS)]
        mask = masks[n % len(masks)]
        models = [m for m in MODELS if expected_rejection(m, task, mask) is None]
        accepted.append((models[n % len(models)], task, mask))
    for combination in COMBINATIONS:
        _, rule = expected_rejection(*combination) or (None, None)
        if rule:
            named = combination[1] if rule == "task_masks" else combination[0]
            groups.setdefault((rule, named), []).append(combination)
    for n, group in enumerate(groups.values()):
        rejected.append(group[n % len(group)])
    return accepted, rejected


ACCEPTED, REJECTED = rows()


def combo_overrides(model: str, task: str, mask: str) -> list[str]:
    return [f"model={model}", f"task={task}", f"mask={mask}"]


def test_the_groups_offer_every_variant_and_task():
    assert MODELS == sorted(VARIANTS)
    assert TASK_NAMES == sorted(TASK_REGISTRY)
    # The lab's 15 models x 7 tasks x 3 masks: 107 of them cannot work (30 next_word and 30 induction without a
    # causal mask, 7 cross with one, 40 of the four recurrences without one on the other five tasks). Counted from
    # the groups and the classes' facts, so that a variant or task added in its own file (tests/test_extension.py)
    # is counted too.
    causal_tasks = [task for task in TASK_NAMES if TASK_MASKS[task] == ["causal"]]
    encoder_decoders = sum(ATTENTION_REGISTRY[model].takes_source for model in MODELS)
    recurrences = sum(ATTENTION_REGISTRY[model].causal_only for model in MODELS)
    models, tasks, others = len(MODELS), len(TASK_NAMES), len(TASK_NAMES) - len(causal_tasks)
    assert {"next_word", "induction"} <= set(causal_tasks) and encoder_decoders and recurrences
    rejected = [c for c in COMBINATIONS if expected_rejection(*c)]
    assert len(rejected) == len(causal_tasks) * models * 2 + encoder_decoders * tasks + recurrences * others * 2
    # The rows kept cover every task, every mask, and every rule once per what it names.
    assert sorted(t for _, t, _ in ACCEPTED) == TASK_NAMES and {k for _, _, k in ACCEPTED} == set(MASKS)
    assert len(REJECTED) == len(causal_tasks) + encoder_decoders * 2 + recurrences


@pytest.mark.parametrize(("model", "task", "mask"), ACCEPTED, ids=["-".join(c) for c in ACCEPTED])
def test_accepted_combination_composes_validates_and_builds(model, task, mask):
    import hydra

    from attention_lab.data.corpus import PAD_ID, Vocabulary, read_sentences

    cfg = compose_config(combo_overrides(model, task, mask))
    validate(cfg)
    assert (cfg.model.name, cfg.task.name, cfg.mask) == (model, task, Mask(mask))

    # The config builds a model that runs: one weights-path forward pass on a padded batch.
    vocab = Vocabulary.from_sentences(read_sentences(cfg.task.corpus)).itos
    module = hydra.utils.instantiate(cfg.module, vocab=vocab)
    tokens = torch.tensor([[2, 3, 4, 5], [6, 7, PAD_ID, PAD_ID]])
    with capture(module.model, points=("weights",)) as cache:
        logits = module(tokens)
    weights = cache.layers("weights")
    assert logits.shape == (2, 4, len(vocab))
    heads = cfg.model.num_heads if ATTENTION_REGISTRY[model].multi_head else 1
    assert len(weights) == cfg.layers
    assert all(w.shape == (2, heads, 4, 4) for w in weights)
    if mask == "causal":  # no query attends to a later key
        assert all(torch.triu(w, diagonal=1).abs().max() == 0 for w in weights)
    if mask == "padding":  # no query attends to <pad>
        assert all(w[1, :, :, 2:].abs().max() == 0 for w in weights)


@pytest.mark.parametrize(("model", "task", "mask"), REJECTED,
                         ids=[f"{'-'.join(c)}:{expected_rejection(*c)[1]}" for c in REJECTED])
def test_rejected_combination_fails_with_one_line_naming_the_setting(model, task, mask):
    cfg = compose_config(combo_overrides(model, task, mask))  # composes: the types are fine ...
    with pytest.raises(ConfigError) as err:  # ... the combination is not
        validate(cfg)
    message = str(err.value)
    start, rule = expected_rejection(model, task, mask)
    assert message.startswith(start), f"expected the error to start with {start!r} ({rule}); got: {message}"
    assert "\n" not in message


@pytest.mark.parametrize(("overrides", "setting"), [
    (["model=multihead", "heads=5"], "heads=5"),              # 5 does not divide d_model=48
    (["model=multihead_concat", "heads=7"], "heads=7"),
    (["model=multihead", "d_model=50", "heads=4"], "heads=4"),
    (["task.max_len=20"], "task.max_len=20"),                  # longer than the positional table (16)
    (["task.min_len=9"], "task.min_len=9"),                    # > task.max_len=8
    (["layers=0"], "layers=0"),
    (["lr=0"], "lr=0"),
    (["model.dropout=1.0"], "model.dropout=1.0"),
    (["model=simple", "model.options.normalize=max"], "model.options.normalize=max"),  # simple's own option
], ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_cross_field_rule_fails_before_training_naming_the_setting(overrides, setting):
    cfg = compose_config(overrides)
    with pytest.raises(ConfigError) as err:
        validate(cfg)
    assert setting in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("overrides", [
    ["model=multihead", "heads=3"],         # the headline command
    ["model=multihead", "heads=1"],
    ["model=multihead_concat", "heads=16"],
    ["model=multihead", "d_model=96", "heads=12"],
    ["model=self", "heads=3"],              # a composed config: one head (a single run's command line refuses it)
    ["model=self", "mask=causal", "task=next_word"],
    ["model=cross", "task=reverse"],
    ["model=simple", "model.options.normalize=sum"],
    ["block=attention_only"],
    ["model=cross", "block=attention_only", "task=sort"],
    ["task.corpus=/any/file.txt"],          # checked when the data is read, not here
    ["device=cpu"], ["device=cuda"], ["device=mps"],  # availability is checked at run time
    ["optimized_metric=ood/seq_acc", "task.ood_min_len=9", "task.ood_max_len=12"],  # what a sweep may maximise
    ["optimized_metric=head_score/induction/layer1/head3", "task=induction", "mask=causal"],
    ["optimized_metric=attention_entropy/layer0/head0"],
], ids=" ".join)
def test_accepted_knobs(overrides):
    validate(compose_config(overrides))


@pytest.mark.parametrize(("overrides", "named"), [
    (["heads=two"], "heads"),
    (["d_model=4.5"], "d_model"),
    (["lr=fast"], "lr"),
    (["mask=diagonal"], "mask"),
    (["device=tpu"], "device"),
    (["block.mlp=maybe"], "block.mlp"),
    (["task.train_size=1.5"], "task.train_size"),
    (["haeds=3"], "haeds"),                 # typo of a top-level knob
    (["model.num_head=2"], "model.num_head"),
    (["model=selff"], "model/selff"),       # typo of a group option
    (["task=revrse"], "task/revrse"),
    (["trainer=dpp"], "trainer/dpp"),
], ids=lambda v: v if isinstance(v, str) else " ".join(v))
def test_typos_and_wrong_types_fail_at_compose_time(overrides, named):
    with pytest.raises(ConfigCompositionException) as err:
        compose_config(overrides)
    # The message (or, for a wrong type, its cause) names what was mistyped.
    text = f"{err.value} {err.value.__cause__}"
    assert named in text


# The variants compose and validate in tests/attention/test_variant_configs.py's rows, the tasks in ACCEPTED's.
@pytest.mark.parametrize(("group", "option"), [
    (group, option)
    for group in ("block", "trainer", "logger", "callbacks", "experiment", "hparams_search", "debug")
    for option in options(group)
])
def test_every_group_option_composes_and_validates(group, option):
    validate(compose_config([f"{group}={option}"]))


def test_trainer_presets():
    ddp = compose_config(["trainer=ddp"]).trainer
    assert (ddp.accelerator, ddp.strategy, ddp.devices) == ("gpu", "ddp", -1)
    sim = compose_config(["trainer=ddp_sim"]).trainer
    assert (sim.accelerator, sim.strategy, sim.devices) == ("cpu", "ddp_fork", 2)
    default = compose_config().trainer
    assert default.accelerator is None  # taken from the `device` knob
    assert (default.max_steps, default.max_epochs) == (1500, None)


def test_presets_override_the_top_level_knobs():
    """experiment/, hparams_search/ and debug/ come after train.yaml's own values in the defaults list."""
    ablation = compose_config(["experiment=mask_ablation"], return_hydra_config=True)
    assert (ablation.model.name, ablation.task.name, ablation.heads, ablation.max_steps) == ("self", "reverse", 1, 800)
    assert ablation.hydra.sweeper.params.mask == "none,causal"
    assert compose_config(["experiment=mask_ablation", "max_steps=5"]).max_steps == 5  # the command line wins
    for arm in ("none", "causal"):  # both arms are valid configs: one learns, one cannot
        validate(compose_config(["experiment=mask_ablation", f"mask={arm}"]))

    optuna = compose_config(["hparams_search=optuna"], return_hydra_config=True)
    assert optuna.max_steps == 300 and optuna.optimized_metric == "val/seq_acc"
    assert optuna.hydra.sweeper._target_.endswith("OptunaSweeper")
    assert optuna.hydra.sweeper.direction == "maximize"

    assert compose_config(["debug=fast"]).trainer.fast_dev_run is True


def test_run_and_sweep_dirs_are_unique_per_microsecond():
    hydra_cfg = compose_config(return_hydra_config=True).hydra
    raw = OmegaConf.to_container(hydra_cfg, resolve=False)
    # A new run gets outputs/runs/<date>/<time with µs>; resume=<dir> keeps the run in its own dir.
    assert raw["run"]["dir"] == "${lab.run_dir:${resume},outputs/runs/${now:%Y-%m-%d}/${now:%H-%M-%S-%f}}"
    assert hydra_cfg.run.dir.startswith("outputs/runs/")
    assert compose_config(["resume=/some/run"], return_hydra_config=True).hydra.run.dir == "/some/run"
    assert raw["sweep"]["dir"].startswith("outputs/multirun/") and raw["sweep"]["dir"].endswith("%f}")
    assert hydra_cfg.job.chdir is False


# --- hydra/launcher presets ------------------------------------------------------------------------------

def launcher(*overrides: str):
    return compose_config(list(overrides), return_hydra_config=True).hydra.launcher


def test_parallel_runs_the_labs_launcher_and_joblib_is_no_alias():
    """`hydra/launcher=parallel` runs the lab's own launcher: hydra-joblib-launcher's loky pool breaks as a whole
    when one worker dies and leaves orphans after a SIGTERM, so the lab does not install it, and no `joblib` name
    stands for something else. The slurm presets extend the submitit plugin's configs under their own names."""
    import hydra

    ours = set(options("hydra/launcher"))
    assert {"parallel", "slurm"} <= ours and "joblib" not in ours
    assert not ours & {"basic", "submitit_local", "submitit_slurm"}
    with pytest.raises(ConfigCompositionException):
        launcher("hydra/launcher=joblib")
    parallel = launcher("hydra/launcher=parallel", "hydra.launcher.n_jobs=-1")
    assert parallel.n_jobs == -1  # joblib's meaning: one job per core
    # By name: Hydra's plugin scan runs the module once more, so its class objects differ from an import's.
    assert type(hydra.utils.instantiate(parallel)).__name__ == "ParallelLauncher"
    assert launcher("hydra/launcher=submitit_slurm").gpus_per_node is None
    with pytest.raises(ConfigCompositionException):  # typed by the launcher's schema
        launcher("hydra/launcher=parallel", "hydra.launcher.backend=loky")


def test_parallel_launcher_preset():
    import hydra

    cfg = launcher("hydra/launcher=parallel")
    assert cfg.n_jobs == 2
    assert type(hydra.utils.instantiate(cfg)).__name__ == "ParallelLauncher"
    assert hydra.utils.instantiate(cfg).n_jobs == 2
    every_core = launcher("hydra/launcher=parallel", "hydra.launcher.n_jobs=-1")
    assert hydra.utils.instantiate(every_core).n_jobs == os.cpu_count()
    assert launcher("hydra/launcher=parallel", "hydra.launcher.n_jobs=4").n_jobs == 4
    for typo in ("hydra.launcher.n_jobs=two", "hydra.launcher.njobs=2"):  # typed by the launcher's schema
        with pytest.raises(ConfigCompositionException):
            launcher("hydra/launcher=parallel", typo)


@pytest.fixture
def fake_sbatch(tmp_path, monkeypatch) -> Path:
    """No SLURM cluster here (tests/e2e/test_slurm.py has one): an `srun` on PATH, without which submitit builds no
    SLURM executor, and an `sbatch` that keeps the script it is given and answers like SLURM. Returns the
    path of the kept script."""
    kept = tmp_path / "submitted.sbatch"
    fakes = {"srun": "exit 1", "sbatch": f'cp "$1" {kept}\necho "Submitted batch job 1"'}
    (tmp_path / "bin").mkdir()
    for name, body in fakes.items():
        tool = tmp_path / "bin" / name
        tool.write_text(f"#!/bin/sh\n{body}\n")
        tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    return kept


def submitted_script(cfg, kept: Path) -> str:
    """The sbatch script of a job submitted with the launcher config ``cfg``, through submitit's public API,
    its executor built the way hydra-submitit-launcher's SlurmLauncher.launch builds it."""
    import submitit
    from hydra_plugins.hydra_submitit_launcher.config import BaseQueueConf

    params = OmegaConf.to_container(cfg, resolve=True)
    params.pop("_target_")
    executor = submitit.AutoExecutor(folder=params.pop("submitit_folder"), cluster="slurm",
                                     slurm_max_num_timeout=params.pop("max_num_timeout"))
    shared = set(OmegaConf.structured(BaseQueueConf).keys())
    executor.update_parameters(**{k if k in shared else f"slurm_{k}": v for k, v in params.items()})
    executor.submit(print)
    return kept.read_text()


def test_slurm_launcher_preset_renders_an_sbatch_script(fake_sbatch: Path, tmp_path: Path):
    import hydra
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import SlurmLauncher

    cfg = launcher("hydra/launcher=slurm", "hydra.launcher.partition=gpu", f"hydra.sweep.dir={tmp_path}")
    assert (cfg.timeout_min, cfg.gpus_per_node, cfg.tasks_per_node, cfg.nodes) == (60, 1, 1, 1)
    assert isinstance(hydra.utils.instantiate(cfg), SlurmLauncher)
    with pytest.raises(ConfigCompositionException):  # typo of an sbatch setting
        launcher("hydra/launcher=slurm", "hydra.launcher.partiton=gpu")
    script = submitted_script(cfg, fake_sbatch)
    for line in ("--time=60", "--gpus-per-node=1", "--partition=gpu", "--ntasks-per-node=1", "--nodes=1",
                 "--cpus-per-task=4", "--mem=16GB", f"--output={tmp_path}/.submitit/", "--signal=USR2@120"):
        assert f"#SBATCH {line}" in script


def test_local_slurm_preset_asks_for_cpus_only(fake_sbatch: Path, tmp_path: Path):
    """`hydra/launcher=slurm_local`, for the cluster of `make slurm-up`: one CPU and no GPU per job; DDP over
    SLURM tasks through tasks_per_node."""
    cfg = launcher("hydra/launcher=slurm_local", "hydra.launcher.tasks_per_node=2", f"hydra.sweep.dir={tmp_path}")
    script = submitted_script(cfg, fake_sbatch)
    for line in ("--cpus-per-task=1", "--mem=2GB", "--ntasks-per-node=2", "--time=60"):
        assert f"#SBATCH {line}" in script
    assert "--gpus" not in script and "--partition" not in script


def test_run_names_say_what_was_set():
    """TensorBoard's name for a run: its overrides, without the ones that only change the display or the place."""
    from attention_lab.run.overrides import run_name

    assert run_name(["model=multihead", "heads=3"]) == "model=multihead,heads=3"
    assert run_name(["+position=rope", "trainer.enable_progress_bar=false", "~callbacks.progress_bar",
                     "hydra.run.dir=/x", "resume=/x", "device=cpu", "task.corpus=/data/my.txt"]) == \
        "position=rope,task.corpus=_data_my.txt"
    assert run_name([]) == ""
    assert run_name(["probe=The cat sat on the mat", "device=cpu"]) == "probe=The cat sat on the mat"  # its maps
    assert len(run_name([f"tags=[{'x' * 300}]", f"task.corpus={'y' * 300}"])) == 150
