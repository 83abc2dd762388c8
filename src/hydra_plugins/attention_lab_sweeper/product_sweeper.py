"""The product of a sweep's values, each distinct run once (``hydra/sweeper=product``, the lab's default).

``-m model=self,multihead heads=1,2`` is four combinations but three runs: ``self`` has one head whatever
``heads`` says. Hydra's basic sweeper would train ``self`` twice. This sweeper composes every combination once
and checks it, as every job of a sweep is checked before any dir exists (the preflight callback leaves a product
sweep to it: ``check_product_sweep`` in attention_lab.run.preflight). It folds those that would train the same run
into the first of them (:func:`attention_lab.run.sweep_jobs.fold_jobs`), claims the sweep dir, says so before the
first job (one ``folded: ...`` line each), records the folds in ``<sweep dir>/sweep_folds.json`` (the sweep
summary and compare.py show them) and hands only the distinct jobs to the launcher, numbered from 0. Any
launcher works (basic, parallel, SLURM), and a resume of the sweep plans the same jobs under the same numbers.
Otherwise it behaves as the basic sweeper: ``params``, ``max_batch_size``, ``<sweep dir>/multirun.yaml``.
"""

# No `from __future__ import annotations`: Hydra executes plugin modules outside sys.modules while scanning,
# where dataclasses cannot resolve string annotations.
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hydra.core.config_store import ConfigStore
from hydra.core.plugins import Plugins
from hydra.core.utils import JobReturn
from hydra.plugins.launcher import Launcher
from hydra.plugins.sweeper import Sweeper
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig, OmegaConf

if TYPE_CHECKING:
    from attention_lab.run.sweep_jobs import SweepPlan

log = logging.getLogger(__name__)


@dataclass
class ProductSweeperConf:
    _target_: str = "hydra_plugins.attention_lab_sweeper.product_sweeper.ProductSweeper"
    max_batch_size: int | None = None  # jobs handed to the launcher at once; null = all of them
    params: dict[str, str] | None = None  # sweep overrides of a preset (experiment/*.yaml), before the command's


ConfigStore.instance().store(group="hydra/sweeper", name="product", node=ProductSweeperConf,
                             provider="attention_lab")


def started(config: DictConfig, plan: "SweepPlan") -> Path:
    """Once a sweep's jobs passed their checks: its dir claimed (a resumed sweep's is its own), Hydra's record of it
    saved, its folds recorded and said, one line each. Returns the sweep dir. (The ladder sweeper's start too.)"""
    from attention_lab.records.files import FOLDS, MULTIRUN_RECORD, write_json
    from attention_lab.run.run_info import claim_new_sweep

    claim_new_sweep(config)
    sweep_dir = Path(str(config.hydra.sweep.dir))
    OmegaConf.save(config, sweep_dir / MULTIRUN_RECORD)
    write_json(sweep_dir / FOLDS, {"folds": [fold.as_json() for fold in plan.folds]})
    for fold in plan.folds:
        log.info(fold.line())
    return sweep_dir


class ProductSweeper(Sweeper):
    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None) -> None:
        super().__init__()
        self.max_batch_size = max_batch_size
        self.params = dict(params or {})
        self.hydra_context: HydraContext | None = None
        self.config: DictConfig | None = None
        self.launcher: Launcher | None = None

    def setup(self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig) -> None:
        self.hydra_context, self.config = hydra_context, config
        self.launcher = Plugins.instance().instantiate_launcher(hydra_context=hydra_context,
                                                                task_function=task_function, config=config)

    def sweep(self, arguments: list[str]) -> list[Sequence[JobReturn]]:
        from attention_lab.run.preflight import check_product_sweep, command_overrides, refuse
        from attention_lab.run.sweep_jobs import params_arguments, planned_jobs

        assert self.hydra_context is not None and self.config is not None and self.launcher is not None
        config, loader = self.config, self.hydra_context.config_loader
        product = planned_jobs(params_arguments(self.params) + list(arguments))
        plan = refuse(lambda: check_product_sweep(config, product, lambda job: loader.load_sweep_config(config, job)),
                      command_overrides(config))
        started(config, plan)
        size = self.max_batch_size if self.max_batch_size and self.max_batch_size > 0 else max(len(plan.jobs), 1)
        returns: list[Sequence[JobReturn]] = []
        for start in range(0, len(plan.jobs), size):
            results = self.launcher.launch(plan.jobs[start:start + size], initial_job_idx=start)
            for result in results:
                result.return_value  # noqa: B018 - re-raises a job's exception, as Hydra's basic sweeper does
            returns.append(results)
        return returns
