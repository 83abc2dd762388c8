"""``<sweep dir>/sweep_summary.json`` (and ``.csv``): one row per job, failed and interrupted ones included,
rewritten after every job from the job dirs' run_info.json and metrics.json; ``folded`` lists the combinations of
a product sweep that were folded into a job training the same run (from the sweeper's ``sweep_folds.json``).
:class:`SweepSummary` is the Hydra callback that keeps it current and gives the sweep its exit status.

The commands that open a finished sweep come from :mod:`attention_lab.records.commands` (:func:`sweep_note`)."""

from __future__ import annotations

import contextlib
import csv
import fcntl
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus
from hydra.experimental.callback import Callback
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from attention_lab.names import natural
from attention_lab.records.commands import sweep_note
from attention_lab.records.escape import csv_cell
from attention_lab.records.files import (
    FOLDS,
    METRICS,
    REFUSED,
    RUN_INFO,
    SUMMARY,
    SUMMARY_CSV,
    read_json,
    replace_atomically,
    secondary_process,
    write_json,
)
from attention_lab.records.run_record import ENDED_WITHOUT_RESULT, MalformedRunInfo, RunInfo, RunStatus, now, parse
from attention_lab.run.describe import describe
from attention_lab.run.overrides import overrides_as_typed

log = logging.getLogger(__name__)


def job_number(job_dir: Path) -> int | None:
    return natural(job_dir.name)


def summary_rows(sweep_dir: Path, *, final: bool = False) -> list[dict[str, Any]]:
    """One row per job dir under sweep_dir that has a run_info.json, ordered by job number. A malformed record is
    a failed row that says so; a job refused because its dir holds another run is a failed row of its own, in
    place of that run's."""
    refused = {number: row for n, row in read_json(sweep_dir / REFUSED).items()
               if (number := natural(n)) is not None and isinstance(row, dict)}
    rows = []
    for info_path in [*sweep_dir.glob(f"*/{RUN_INFO}"), *sweep_dir.glob(f"*/*/{RUN_INFO}")]:
        job_dir = info_path.parent
        if job_number(job_dir) in refused:
            continue
        try:
            info = RunInfo.read(info_path) or RunInfo()
        except MalformedRunInfo as err:  # the job that reads it says so in its own line
            info = RunInfo(job=job_number(job_dir), status=RunStatus.FAILED, error=str(err))
        status, error = info.status or RunStatus.RUNNING, info.error
        if info.ended_without_result(sweep_over=final):
            status, error = RunStatus.FAILED, ENDED_WITHOUT_RESULT
        rows.append({
            "job": info.job, "overrides": info.overrides, "status": status.value, "error": error,
            "metrics": read_json(job_dir / METRICS) if status is RunStatus.OK else {},
            "output_dir": str(job_dir), "wall_time_s": info.wall_time_s,
        })
    rows += [{"job": n, "overrides": [str(o) for o in row.get("overrides") or []], "status": "failed",
              "error": str(row.get("error")), "metrics": {}, "output_dir": str(sweep_dir / str(n)), "wall_time_s": None}
             for n, row in refused.items()]
    rows.sort(key=lambda r: (r["job"] is None, r["job"] if r["job"] is not None else 0, r["output_dir"]))
    return rows


def recorded_folds(sweep_dir: Path) -> list[dict[str, Any]]:
    """The sweeper's folds, each entry with the fields and types it writes (the sweep dir is data: others are
    left out)."""
    folds = read_json(sweep_dir / FOLDS).get("folds")
    fields = {"overrides": list, "into": int, "into_overrides": list, "reason": str}
    return [{key: fold[key] for key in fields} for fold in (folds if isinstance(folds, list) else [])
            if isinstance(fold, dict) and all(isinstance(fold.get(key), kind) and not isinstance(fold.get(key), bool)
                                              for key, kind in fields.items())
            and all(isinstance(o, str) for o in [*fold["overrides"], *fold["into_overrides"]])]


@contextlib.contextmanager
def summary_lock(sweep_dir: Path) -> Iterator[None]:
    """Parallel jobs write the sweep's records one at a time."""
    with open(sweep_dir / ".sweep_summary.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def record_refusal(sweep_dir: Path, job: int, overrides: list[str], error: str | None) -> None:
    """Job ``job`` did not run because its dir holds another run (``error`` says which), or, with error None, it
    now runs in its own dir again."""
    with summary_lock(sweep_dir):
        refused = read_json(sweep_dir / REFUSED)
        if error is not None:
            refused[str(job)] = {"overrides": overrides, "error": error}
        elif refused.pop(str(job), None) is None:
            return
        write_json(sweep_dir / REFUSED, refused)


def write_summary(sweep_dir: Path, *, final: bool = False) -> dict[str, Any]:
    """(Re)write the summary files; a lock keeps parallel jobs from interleaving their writes."""
    with summary_lock(sweep_dir):
        rows = summary_rows(sweep_dir, final=final)
        counts: dict[str, int] = {}
        for row in rows:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
        document = {"sweep_dir": str(sweep_dir), "updated_at": now(), "total": len(rows), "counts": counts,
                    "jobs": rows, "folded": recorded_folds(sweep_dir)}
        write_json(sweep_dir / SUMMARY, document)
        metric_keys = sorted({key for row in rows for key, value in row["metrics"].items() if not isinstance(value, dict)})

        def write_csv(tmp: Path) -> None:
            with open(tmp, "w", newline="") as handle:
                table = [["job", "status", "error", "wall_time_s", "output_dir", "overrides", *metric_keys]]
                table += [[row["job"], row["status"], row["error"] or "", row["wall_time_s"], row["output_dir"],
                           " ".join(row["overrides"]), *(row["metrics"].get(k, "") for k in metric_keys)] for row in rows]
                # Every cell as in compare.csv: text that a spreadsheet would run as a formula is escaped.
                csv.writer(handle).writerows([csv_cell(cell) for cell in cells] for cells in table)

        replace_atomically(sweep_dir / SUMMARY_CSV, write_csv)
    return document


def tally(document: dict[str, Any]) -> str:
    return ", ".join(f"{n} {status}" for status, n in sorted(document["counts"].items())) or "no jobs"


def sweep_dir_of(config: DictConfig) -> Path:
    return Path(os.path.abspath(str(OmegaConf.select(config, "hydra.sweep.dir"))))


class SweepSummary(Callback):
    """After every job of a multirun, and at its end, rewrites the sweep summary. A sweep with a job that did
    not succeed exits with status 1 and one line that points at the summary."""

    def on_job_end(self, config: DictConfig, job_return: JobReturn, **kwargs: Any) -> None:
        if HydraConfig.get().mode != RunMode.MULTIRUN or secondary_process():
            return
        job_dir = Path(HydraConfig.get().runtime.output_dir)
        if job_return.status == JobStatus.FAILED:  # raised past the task function: record it all the same
            try:
                job_return.return_value  # noqa: B018 - the property re-raises the job's exception
            except Exception as err:  # noqa: BLE001
                info, _ = parse(read_json(job_dir / RUN_INFO))  # what can be kept of it; the rest is replaced
                info.status, info.error, info.job = RunStatus.FAILED, describe(err), int(HydraConfig.get().job.num)
                info.overrides, info.output_dir = overrides_as_typed(HydraConfig.get(), "task"), str(job_dir)
                info.write(job_dir / RUN_INFO)
        document = write_summary(sweep_dir_of(config))
        n_trials = OmegaConf.select(config, "hydra.sweeper.n_trials")
        if isinstance(n_trials, int) and HydraConfig.get().job.num == n_trials - 1 and not document["counts"].get("ok"):
            # Optuna's sweeper asks its study for the best trial after the last one, and with none it raises
            # (ValueError: Record does not exist): the search ends here, in one line.
            sys.exit(f"error: every trial of the search failed ({tally(document)}; errors above and in "
                     f"{sweep_dir_of(config) / SUMMARY})")

    def on_multirun_end(self, config: DictConfig, **kwargs: Any) -> None:
        if secondary_process():
            return
        path = sweep_dir_of(config)
        document = write_summary(path, final=True)
        counts, total = document["counts"], document["total"]
        left = total - counts.get("ok", 0)
        if not left:
            log.info("sweep finished: %s; summary: %s", tally(document), path / SUMMARY)
        if total:  # the commands that show the jobs side by side, failed ones included
            log.info(sweep_note(path))
        if left and OmegaConf.select(config, "resume"):  # resume=<sweep dir>: say what is still left to do
            sys.exit(f"error: {left} job{'s' if left > 1 else ''} still failed or interrupted after resuming the "
                     f"sweep ({tally(document)}; errors above and in {path / SUMMARY}); fix them and resume it again")
        if left:
            sys.exit(f"error: sweep finished with {tally(document)} (errors above and in {path / SUMMARY}); "
                     "the other jobs kept their results")
