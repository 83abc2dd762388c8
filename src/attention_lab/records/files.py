"""The files of a run dir and a sweep dir, how they are written (atomically: readers never see half) and how their
records are read: as data that anyone may have edited, within bounds (:func:`read_json_record`,
:func:`read_yaml_record`)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

# The safe loader with libyaml's parser where PyYAML was built with it, several times faster than the pure-Python
# one; the same constructor, so the same plain data.
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

RUN_INFO = "run_info.json"  # status, error, overrides, wall time of one run (or sweep job)
METRICS = "metrics.json"  # final metrics only: byte-identical for the same config and seed on CPU
SUMMARY = "sweep_summary.json"
SUMMARY_CSV = "sweep_summary.csv"
FOLDS = "sweep_folds.json"  # a product sweep's combinations folded into an earlier job that trains the same run
LADDER = "ladder.json"  # a budget ladder's settings and each cell's jobs by rung (hydra/sweeper=ladder)
REFUSED = "refused_jobs.json"  # jobs of a resumed sweep whose dir holds another run: {job number: row}
MULTIRUN_RECORD = "multirun.yaml"  # Hydra's record of a sweep's config and command line
SWEEP_DIRECTIONS = ("maximize", "minimize")  # its hydra.sweeper.direction, as Optuna's sweeper spells them
CHECKPOINTS = "checkpoints"
LAST_CHECKPOINT = "last.ckpt"  # the end of training: the model metrics.json describes
BEST_CHECKPOINT = "best.ckpt"  # the best validation (ModelCheckpoint's filename in configs/callbacks/default.yaml)
CHECKPOINT_SUFFIX = ".ckpt"
TRACEBACK = "traceback.txt"
LOCK = ".run.lock"  # held by the process training in a run dir
RESUME_LOCK = ".resume.lock"  # held by the resume of a sweep, in the sweep dir
SAVED_OVERRIDES = Path(".hydra") / "overrides.yaml"
SAVED_CONFIG = Path(".hydra") / "config.yaml"

# The most bytes the lab reads of a record, by its name. Each is far above what the lab writes (a run's
# overrides.yaml and run_info.json hold a few lines, a sweep's multirun.yaml one copy of the config) and far below
# what takes minutes to read: every override in it is parsed and composed again, so the time and memory of a
# resume grow with the file. JSON parses fast; metrics.json grows with the model's heads and sweep_summary.json
# with the sweep's jobs, so the other records get more room.
RECORD_LIMITS = {SAVED_OVERRIDES.name: 64 << 10, MULTIRUN_RECORD: 1 << 20, SAVED_CONFIG.name: 1 << 20, RUN_INFO: 1 << 20}
RESULTS_LIMIT = 64 << 20  # any other record: metrics.json, sweep_summary.json, sweep_folds.json, ladder.json, ...
# Deeper than any record the lab writes (about 6 levels), and shallower than Python's recursion limit, which any
# reader of a deeper one (json.dumps, OmegaConf) would hit.
MAX_RECORD_DEPTH = 100



def replace_atomically(path: Path, write: Callable[[Path], object]) -> None:
    """``write(tmp)`` beside ``path``, then rename it over ``path``: readers see the old file or the new one, and
    a failed write (a full disk) leaves the old one and no temp file. Nothing is written through a link: a symlink
    at ``path`` is replaced, not followed, and the temp file is a new file (created exclusively, after removing
    whatever had its name). The temp file keeps ``path``'s suffix, which writers such as matplotlib's savefig read
    the format from."""
    tmp = path.with_name(f".{path.stem}.{os.getpid()}.tmp{path.suffix}")
    try:
        tmp.unlink(missing_ok=True)  # a link planted under the temp file's name is removed, not followed
        os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_json(path: Path, data: Any) -> None:
    replace_atomically(path, lambda tmp: tmp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n"))


def write_text(path: Path, text: str) -> None:
    replace_atomically(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def save_yaml(config: Any, path: Path) -> None:
    """An OmegaConf config as YAML, replaced atomically."""
    from omegaconf import OmegaConf

    replace_atomically(path, lambda tmp: OmegaConf.save(config, tmp))


class UnreadableRecord(ValueError):
    """A record the lab does not read: too large, not UTF-8 text, not valid JSON or YAML, nested too deeply, or
    with YAML aliases. ``problem`` says which, in words that follow the file's name in a one-line message."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path, self.problem = path, problem


def record_limit(path: Path) -> int:
    return RECORD_LIMITS.get(path.name, RESULTS_LIMIT)


def shown_bytes(size: int) -> str:
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


def record_text(path: Path) -> str:
    """The text of a record, read no further than its limit. Raises FileNotFoundError for a missing one,
    UnreadableRecord for one that cannot be read, is larger or is not UTF-8."""
    limit = record_limit(path)
    try:
        with path.open("rb") as f:
            data = f.read(limit + 1)
    except FileNotFoundError:
        raise
    except OSError as err:
        raise UnreadableRecord(path, f"cannot be read ({err.strerror or type(err).__name__})") from None
    if len(data) > limit:
        raise UnreadableRecord(path, f"larger than {shown_bytes(limit)}, the most the lab reads of {path.name}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UnreadableRecord(path, "not UTF-8 text") from None


def check_shape(path: Path, data: Any) -> Any:
    """``data`` as parsed, when it nests at most MAX_RECORD_DEPTH levels and no list or mapping appears in it twice
    (YAML aliases: a few lines that a reader would expand into billions of items). Walked without recursion."""
    seen: set[int] = set()
    pending = [(data, 0)]
    while pending:
        node, depth = pending.pop()
        if not isinstance(node, (dict, list)):
            continue
        if depth >= MAX_RECORD_DEPTH:
            raise UnreadableRecord(path, f"nested deeper than {MAX_RECORD_DEPTH} levels")
        if id(node) in seen:
            raise UnreadableRecord(path, "uses a YAML alias (a list or mapping repeated), which no record holds")
        seen.add(id(node))
        pending.extend((child, depth + 1) for child in (node.values() if isinstance(node, dict) else node))
    return data


def read_json_record(path: Path) -> Any:
    """The JSON value in a record (NaN and infinities included: the lab writes them for a diverged run). Raises
    FileNotFoundError and UnreadableRecord as :func:`record_text`."""
    text = record_text(path)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise UnreadableRecord(path, f"not valid JSON (line {err.lineno}, column {err.colno})") from None
    except RecursionError:
        raise UnreadableRecord(path, f"nested deeper than {MAX_RECORD_DEPTH} levels") from None
    return check_shape(path, data)


def read_yaml_record(path: Path) -> Any:
    """The YAML value in a record, as plain data (YAML's safe types only: nothing in it is resolved or built).
    Raises FileNotFoundError and UnreadableRecord as :func:`record_text`."""
    text = record_text(path)
    try:
        data = yaml.load(text, Loader=SAFE_LOADER)
    except Exception:  # noqa: BLE001 - a bad record: the reference parser says what is wrong with it
        data = parsed_by_reference(path, text)
    return check_shape(path, data)


def parsed_by_reference(path: Path, text: str) -> Any:
    """``text`` parsed by PyYAML's pure-Python parser, whose errors the messages name (libyaml's parser stops at a
    depth of its own, in its own words). Raises UnreadableRecord for what it refuses."""
    try:
        return yaml.safe_load(text)
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = "" if mark is None else f" (line {mark.line + 1}, column {mark.column + 1})"
        raise UnreadableRecord(path, f"not valid YAML{where}") from None
    except yaml.YAMLError:
        raise UnreadableRecord(path, "not valid YAML") from None
    except RecursionError:
        raise UnreadableRecord(path, f"nested deeper than {MAX_RECORD_DEPTH} levels") from None
    except Exception as err:  # noqa: BLE001 - a tagged scalar that its type's converter refuses (!!float x)
        raise UnreadableRecord(path, f"not valid YAML (a value its tag's type refuses: {type(err).__name__})") from None


def recorded_overrides(record: Any, part: str) -> Any:
    """``hydra.overrides.<part>`` (task: the jobs' overrides, hydra: Hydra's own) of multirun.yaml's data; None
    where the record has no such key."""
    for key in ("hydra", "overrides", part):
        record = record.get(key) if isinstance(record, dict) else None
    return record


def read_json(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; {} when it is missing, unreadable (:func:`read_json_record`) or not an object."""
    try:
        data = read_json_record(path)
    except (FileNotFoundError, UnreadableRecord):
        return {}
    return data if isinstance(data, dict) else {}


def tensorboard_dir(run_dir: Path) -> Path:
    """Where the run's TensorBoard events are: ``<run dir>/tensorboard/<run name>`` (``default settings`` for a run
    without overrides; ``tensorboard/`` itself for one trained before runs without overrides were named)."""
    found = sorted(run_dir.glob("tensorboard/**/events.out.tfevents.*"), key=lambda p: p.stat().st_mtime)
    return found[-1].parent if found else run_dir / "tensorboard"


def secondary_process() -> bool:
    """A data-parallel worker other than the first (Lightning's DDP launcher, torchrun or SLURM tasks re-run
    this script with the same run dir). Such a worker neither claims the run dir nor writes its records."""
    return any(os.environ.get(var, "0").strip() not in ("", "0")
               for var in ("LOCAL_RANK", "NODE_RANK", "RANK", "SLURM_PROCID"))


def escaping_link(folder: Path, only: str | None = None) -> tuple[Path, str] | None:
    """The first symlink under ``folder`` (or under its entry ``only``) that the lab would follow elsewhere, with
    why; None if there is none."""
    root = folder.resolve()
    for here, dirs, files in os.walk(root):  # os.walk never descends into a symlinked folder
        if only is not None and Path(here) == root:
            dirs[:] = [name for name in dirs if name == only]
            files = [name for name in files if name == only]
        for name in [*dirs, *files]:
            path = Path(here) / name
            if not path.is_symlink():
                continue
            target = path.resolve()
            if path.is_dir():
                return path.relative_to(root), f"a symlink to the folder {target}"
            if not target.is_relative_to(root):
                return path.relative_to(root), f"a symlink to {target}, outside it"
    return None
