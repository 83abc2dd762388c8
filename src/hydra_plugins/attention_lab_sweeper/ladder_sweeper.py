"""A budget ladder (``hydra/sweeper=ladder``): a product sweep run in rungs of growing ``max_steps``, each rung
only for the cells that no search value has solved yet.

``params`` is a product as with ``hydra/sweeper=product``; ``search`` names one of its keys (``lr``), and a cell is
one combination of the others. Rung 0 runs the whole product at ``max_steps=rungs[0]``; each later rung runs, for
each cell none of whose jobs solved (metrics.json's ``steps_to_solve`` not null), its ``keep[r]`` best search values
of the rung before (by the run's ``optimized_metric`` in ``direction``), from scratch at ``max_steps=rungs[r]`` (the
plan, and why from scratch: :mod:`attention_lab.run.ladder`). Before anything runs, the settings are checked and
every job of rung 0 is composed and checked as the product sweeper checks its jobs (``check_product_sweep``:
combinations that train the same run fold into one), and the first job of each later rung at its budget. Jobs are
numbered across rungs (``launch(jobs, initial_job_idx=...)``), so any launcher works, and each rung's results are
read from its jobs' metrics.json, so ``resume=<sweep dir>`` plans the same jobs under the same numbers: finished
jobs are kept and report their recorded results. ``<sweep dir>/ladder.json`` records the settings and each cell's
jobs, rewritten after every rung.
"""

# No `from __future__ import annotations`: Hydra executes plugin modules outside sys.modules while scanning,
# where dataclasses cannot resolve string annotations.
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hydra.core.config_store import ConfigStore
from hydra.core.utils import JobReturn
from omegaconf import OmegaConf

from hydra_plugins.attention_lab_sweeper.product_sweeper import ProductSweeper, ProductSweeperConf, started

log = logging.getLogger(__name__)


@dataclass
class LadderSweeperConf(ProductSweeperConf):
    """The product sweeper's settings (``max_batch_size`` counts a rung's jobs: null = a whole rung) and the
    ladder's own."""

    _target_: str = "hydra_plugins.attention_lab_sweeper.ladder_sweeper.LadderSweeper"
    search: str | None = None  # the key whose values each rung ranks, per cell (lr)
    rungs: list[int] = field(default_factory=list)  # max_steps of each rung, increasing: [500, 2000, 6000]
    keep: list[Any] | None = None  # per rung, how many of a cell's search values run in it (null: all)
    direction: str = "maximize"  # how optimized_metric ranks a cell's values: maximize | minimize (as Optuna's)


ConfigStore.instance().store(group="hydra/sweeper", name="ladder", node=LadderSweeperConf, provider="attention_lab")


class LadderSweeper(ProductSweeper):
    """The product sweeper's set-up, its jobs launched rung by rung."""

    def __init__(self, max_batch_size: int | None = None, params: dict[str, str] | None = None,
                 search: str | None = None, rungs: Sequence[int] = (), keep: Sequence[Any] | None = None,
                 direction: str = LadderSweeperConf.direction) -> None:
        super().__init__(max_batch_size, params)
        self.search, self.rungs, self.keep = search, list(rungs or []), None if keep is None else list(keep)
        self.direction = direction

    def sweep(self, arguments: list[str]) -> list[Sequence[JobReturn]]:
        from attention_lab.records.files import LADDER, write_json
        from attention_lab.run.ladder import BUDGET, cells_of, check_ladder, first_rung, ladder_record, next_rung
        from attention_lab.run.overrides import override_key
        from attention_lab.run.preflight import check_product_sweep, command_overrides, refuse
        from attention_lab.run.sweep_jobs import params_arguments, planned_jobs

        assert self.hydra_context is not None and self.config is not None and self.launcher is not None
        config, loader = self.config, self.hydra_context.config_loader
        product = planned_jobs(params_arguments(self.params) + list(arguments))
        typed = command_overrides(config)
        settings = (self.search, self.rungs, self.keep, self.direction)
        search, rungs, keep = refuse(lambda: check_ladder(*settings, product), typed)

        plan = refuse(lambda: check_product_sweep(config, [[*job, f"{BUDGET}={rungs[0]}"] for job in product],
                                                  lambda job: loader.load_sweep_config(config, job)), typed)
        for budget in rungs[1:]:  # a later rung's jobs differ from rung 0's only in their budget and how many
            refuse(lambda b=budget: check_product_sweep(config, [[*plan.jobs[0][:-1], f"{BUDGET}={b}"]],
                                                        lambda job: loader.load_sweep_config(config, job)), typed)
        sweep_dir = started(config, plan)
        metric_name = str(config.optimized_metric)
        cells = cells_of([[o for o in job if override_key(o) != BUDGET] for job in plan.jobs], search)
        jobs = first_rung(cells, search, rungs)
        returns: list[Sequence[JobReturn]] = []
        for rung in range(len(rungs)):
            if not jobs:  # every cell solved
                break
            log.info("ladder rung %d: max_steps=%d, %d jobs", rung, rungs[rung], len(jobs))
            write_json(sweep_dir / LADDER, ladder_record(search, rungs, keep, cells, rung, metric_name,
                                                            self.direction))  # planned
            returns += self.launch(jobs, sweep_dir, metric_name)
            write_json(sweep_dir / LADDER, ladder_record(search, rungs, keep, cells, rung + 1, metric_name,
                                                            self.direction))
            jobs = next_rung(cells, search, rungs, keep, rung, jobs[-1].num + 1, self.direction)
        return returns

    def launch(self, jobs: list, sweep_dir: Path, metric_name: str) -> list[Sequence[JobReturn]]:
        """A rung's ``jobs`` (attention_lab.run.ladder.LadderJob), in batches; each job's outcome read from its
        metrics.json."""
        from attention_lab.records.files import METRICS, read_json
        from attention_lab.records.metrics_file import STEPS_TO_SOLVE

        assert self.launcher is not None
        size = self.max_batch_size if self.max_batch_size and self.max_batch_size > 0 else max(len(jobs), 1)
        returns: list[Sequence[JobReturn]] = []
        for start in range(0, len(jobs), size):
            batch = jobs[start:start + size]
            results = self.launcher.launch([job.overrides for job in batch], initial_job_idx=batch[0].num)
            for job, result in zip(batch, results, strict=True):
                result.return_value  # noqa: B018 - re-raises a job's exception, as Hydra's basic sweeper does
                metrics = read_json(self.job_dir(result, sweep_dir, job.num) / METRICS)
                solved, metric = metrics.get(STEPS_TO_SOLVE), metrics.get(metric_name)
                number = isinstance(metric, (int, float)) and not isinstance(metric, bool)
                job.steps_to_solve = solved if isinstance(solved, int) and not isinstance(solved, bool) else None
                job.metric = float(metric) if number else None
            returns.append(results)
        return returns

    def job_dir(self, result: JobReturn, sweep_dir: Path, num: int) -> Path:
        """The job's run dir: as the job itself resolved it, or (a job whose process died returns no config of
        its own) the sweep's subdir for its number."""
        from attention_lab.run.sweep_jobs import job_subdir

        assert self.config is not None
        output_dir = OmegaConf.select(result.hydra_cfg, "hydra.runtime.output_dir") if result.hydra_cfg else None
        own = OmegaConf.select(result.hydra_cfg, "hydra.job.num") if result.hydra_cfg else None
        if output_dir and own == num:
            return Path(str(output_dir))
        return sweep_dir / job_subdir(self.config.copy(), num)
