"""A finding's jobs, read from sweep dirs and kept in ``docs/results/<name>.json``: the per-seed numbers the docs'
claims were checked on, with the commands that made them. Sweep dirs are read through the review tools' reader,
which bounds what it reads and names what it cannot read; each job becomes a
:class:`~attention_lab.findings.claims.Record`.

A results file holds ``finding``, ``commands``, ``seeds``, ``source`` (where the numbers come from: a rerun on
a date, or the docs' own per-seed table) and ``jobs``: per job its ``overrides`` (key -> value), its ``metrics``
(the finding's, null where not recorded), ``wall_time_s`` (what a job cost, for ``findings.py list``) and, where
run_info.json has it, ``cpu_time_s``. It is read with the lab's bounded JSON reader, as any record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path

from attention_lab.findings.catalogue import Finding
from attention_lab.findings.claims import Record
from attention_lab.findings.errors import FindingError
from attention_lab.records.files import UnreadableRecord, read_json_record, write_text

RESULTS_DIR = Path("docs") / "results"


def override_map(overrides: Iterable[str]) -> dict[str, str]:
    """``["+model.options.sink=zero", "seed=1"]`` -> ``{"model.options.sink": "zero", "seed": "1"}``."""
    pairs = (o.lstrip("+~").split("=", 1) for o in overrides if "=" in o)
    return {key: value for key, value in pairs}


def sweep_records(finding: Finding, sweep_dirs: Sequence[Path]) -> tuple[list[Record], list[str]]:
    """The finished (``ok``) jobs of the sweep dirs, with the finding's metrics; and one line per job left out or
    record the reader could not read."""
    from attention_lab.review.sweep import collect_sweep

    records, problems = [], []
    for sweep_dir in sweep_dirs:
        sweep = collect_sweep(sweep_dir)
        problems += [f"{sweep_dir}: {line}" for line in sweep.problems]
        for job in sweep.jobs:
            if job.status != "ok":
                problems.append(f"{sweep_dir}/{job.id}: {job.status}, left out")
                continue
            known = {**job.metrics, "steps_to_solve": job.steps_to_solve, "params": job.params,
                     "state_size": job.state_size}
            metrics = {name: (None if known.get(name) is None else float(known[name])) for name in finding.metrics}
            records.append(Record(override_map(job.overrides), metrics, job.wall_time_s, job.cpu_time_s))
    return records, problems


def results_path(root: Path, finding: Finding) -> Path:
    return root / RESULTS_DIR / f"{finding.name}.json"


def as_json(finding: Finding, records: Sequence[Record], source: str, seeds: Sequence[int]) -> str:
    def finite(value: float | None) -> float | None:
        return value if value is None or math.isfinite(value) else None

    jobs = [{"overrides": dict(r.overrides), "metrics": {k: finite(v) for k, v in r.metrics.items()},
             "wall_time_s": r.wall_time_s, **({"cpu_time_s": r.cpu_time_s} if r.cpu_time_s is not None else {})}
            for r in records]
    head = {"finding": finding.name, "commands": finding.command_lines(tuple(seeds)), "seeds": list(seeds),
            "source": source}
    # One job a line: a reviewer reads a diff of the numbers seed by seed.
    fields = [f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}" for k, v in head.items()]
    rows = ",\n".join(f"  {json.dumps(job, ensure_ascii=False)}" for job in jobs)
    return "{\n" + ",\n".join(fields) + ',\n "jobs": [\n' + rows + "\n ]\n}\n"


def write_results(root: Path, finding: Finding, records: Sequence[Record], source: str, seeds: Sequence[int]) -> Path:
    path = results_path(root, finding)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, as_json(finding, records, source, seeds))
    return path


def read_results(root: Path, finding: Finding) -> tuple[list[Record], dict] | None:
    """The recorded jobs and the file's other fields; None when the finding has no results file."""
    path = results_path(root, finding)
    try:
        data = read_json_record(path)
    except FileNotFoundError:
        return None
    except UnreadableRecord as err:
        raise FindingError(f"{path}:", "the file", err.problem) from err
    jobs = data.get("jobs") if isinstance(data, dict) else None
    if not isinstance(jobs, list) or not all(isinstance(j, dict) for j in jobs):
        raise FindingError(f"{path}:", "jobs", "a list of objects with overrides, metrics and wall_time_s")
    records = []
    for job in jobs:
        overrides, metrics, wall, cpu = (job.get(k) for k in ("overrides", "metrics", "wall_time_s", "cpu_time_s"))
        if not isinstance(overrides, dict) or not isinstance(metrics, dict) or not all(
                v is None or (isinstance(v, (int, float)) and not isinstance(v, bool)) for v in metrics.values()):
            raise FindingError(f"{path}:", "a job", "overrides (an object) and metrics (numbers or null)")
        records.append(Record({str(k): str(v) for k, v in overrides.items()},
                              {str(k): (None if v is None else float(v)) for k, v in metrics.items()},
                              seconds(wall), seconds(cpu)))
    return records, data


def seconds(value: object) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def seconds_per_job(records: Sequence[Record]) -> float | None:
    times = [r.wall_time_s for r in records if r.wall_time_s is not None]
    return sum(times) / len(times) if times else None
