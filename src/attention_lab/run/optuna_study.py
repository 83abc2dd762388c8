"""An Optuna sweep's study, as ``resume=<sweep dir>`` finds it in the sweep dir: checked as data before the search
goes on, and the overrides that continue it.

The study (``hparams_search=optuna`` keeps it in ``<sweep dir>/optuna.db``, the sweeper's ``storage``) belongs to
its sweep dir: the sweep's id is stamped on it when the sweep claims its dir
(:func:`attention_lab.run.run_info.stamp_study`) and checked when it resumes. A study copied from another sweep
would mix two searches, a deleted one would silently start from nothing, and a corrupt one ends in a deep
SQLAlchemy traceback. A handed-over sweep dir may hold anything in its place, and the sweeper would open it and ask
it for trials, so before anything runs a resume also refuses, in one line:

- a study file that is not a plain file (a folder, a FIFO: SQLite fails on it only once the sweep has begun), or a
  database that holds SQL code of its own (a trigger runs on the sweeper's writes, a view on its reads);
- a storage URL that opens another file than the path it spells (SQLAlchemy reads ``?`` in a sweep dir's path as the
  start of the URL's query: ``<dir>/x.db?/optuna.db`` opens ``<dir>/x.db``, beside the sweep dir);
- a ``.sweep_id`` that is not a short UTF-8 text (at most SWEEP_ID_BYTES are read; a non-UTF-8 one was a traceback);
- a trial waiting in the study (enqueued: the sweeper hands its stored values to a job as they are; the lab never
  enqueues one), or a trial that sampled a parameter of the search from another distribution than the search's own
  (Optuna refuses to sample it again, mid-sweep).
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from attention_lab.errors import ConfigError
from attention_lab.names import natural
from attention_lab.records.files import RUN_INFO, read_json
from attention_lab.records.run_record import RunStatus, parse
from attention_lab.run.run_info import SWEEP_ID, SWEEP_ID_ATTRIBUTE

SWEEP_ID_BYTES = 256  # the most of .sweep_id read (the lab writes 32 hex digits)


def optuna_overrides(sweep_dir: Path, sweeper: Any, arguments: Sequence[str], setting: str) -> list[str]:
    """An Optuna sweep asks new trials: as many as complete ones are missing (the sweeper's n_trials counts the
    trials of one launch), in job dirs after the existing ones (it numbers each launch's jobs from 0;
    ``lab.job_subdir`` adds the offset). A seeded sampler gets another seed per resume: with the same one it
    would propose the same first trials again. ``arguments``: the relaunched command line's own overrides (its
    sweeps are searched too). Raises ConfigError for a study that is not the sweep's own, or a sweep with nothing
    left to run."""
    numbers = [n for p in sweep_dir.iterdir() if p.is_dir() and (n := natural(p.name)) is not None]
    check_own_study(sweep_dir, sweeper, setting, trials_run=len(numbers), arguments=arguments)
    done = sum(parse(read_json(sweep_dir / str(n) / RUN_INFO))[0].status is RunStatus.OK for n in numbers)
    if done >= int(sweeper.n_trials):
        raise ConfigError(f"{setting} is invalid: the search already has {done} complete trials of "
                          f"hydra.sweeper.n_trials={sweeper.n_trials}; for more, give a larger hydra.sweeper.n_trials")
    offset = max(numbers, default=-1) + 1
    overrides = [f"hydra.sweeper.n_trials={int(sweeper.n_trials) - done}",
                 f"hydra.sweep.subdir='${{lab.job_subdir:${{hydra.job.num}},{offset}}}'"]  # quoted: an interpolation
    seed = OmegaConf.select(sweeper, "sampler.seed")
    if isinstance(seed, int):
        overrides.append(f"hydra.sweeper.sampler.seed={seed + offset}")
    return overrides


def sqlite_path(storage: Any) -> Path | None:
    """The file of a ``sqlite:///<path>`` storage, as its text spells it; None for any other storage."""
    prefix = "sqlite:///"
    return Path(str(storage)[len(prefix):]) if str(storage).startswith(prefix) else None


def check_storage_url(storage: Any, path: Path, setting: str) -> None:
    """Raises ConfigError unless SQLAlchemy, which opens the storage, reads its URL as the file ``path`` it spells."""
    from sqlalchemy.engine import make_url

    url = make_url(str(storage))
    if url.database != str(path) or url.query:
        raise ConfigError(f"{setting} is invalid: its Optuna storage {storage} would open {url.database}, not "
                          f"{path}: a database URL reads part of its path otherwise (a '?' starts its query); a "
                          "resume writes only into its sweep dir (move the sweep to a path without it)")


def check_database(path: Path, setting: str) -> None:
    """Raises ConfigError for a study file that is not a plain file, or a SQLite database holding triggers or
    views: code of the file's own that SQLite runs on the sweeper's writes and reads. Read without writing."""
    if not path.is_file():
        raise ConfigError(f"{setting} is invalid: its Optuna study {path.name} is not a file; a resume continues the "
                          "study its sweep wrote there")
    try:
        with contextlib.closing(sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)) as db:
            code = db.execute("SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view')").fetchall()
    except sqlite3.Error as err:
        raise ConfigError(f"{setting} is invalid: {path.name} is not a readable Optuna study "
                          f"({type(err).__name__})") from None
    if code:
        kind, name = code[0]
        raise ConfigError(f"{setting} is invalid: {path.name} holds SQL code of its own (the {kind} {name}), which no "
                          "study of the lab holds and SQLite would run as the search goes on")


def read_sweep_id(sweep_dir: Path, setting: str) -> str | None:
    """The sweep's id (``.sweep_id``), or None where it has none; ConfigError for one the lab did not write."""
    path = sweep_dir / SWEEP_ID
    if not path.is_file():
        return None
    with path.open("rb") as handle:
        data = handle.read(SWEEP_ID_BYTES + 1)
    try:
        if len(data) > SWEEP_ID_BYTES:
            raise ValueError
        return data.decode("utf-8").strip()
    except ValueError:  # UnicodeDecodeError among them
        raise ConfigError(f"{setting} is invalid: its {SWEEP_ID} is not a sweep's id (the lab writes 32 hex digits "
                          "there); a resume continues only its own study") from None


def search_space(arguments: Sequence[str]) -> dict[str, Any]:
    """Each parameter the sweeper samples, with the distribution it samples it from, built as hydra-optuna-sweeper
    builds it (its ``create_params_from_overrides``) from ``arguments``: its ``params``, then the command line's
    overrides. A parameter that an override fixes is not sampled."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import ChoiceSweep, IntervalSweep, RangeSweep, Transformer
    from optuna import distributions as d

    space: dict[str, Any] = {}
    fixed = set()
    for override in OverridesParser.create().parse_overrides(list(arguments)):
        name, value = override.get_key_element(), override.value()
        if not override.is_sweep_override():
            fixed.add(name)
        elif isinstance(value, ChoiceSweep) or (isinstance(value, RangeSweep) and value.shuffle):
            space[name] = d.CategoricalDistribution(list(override.sweep_iterator(transformer=Transformer.encode)))
        elif isinstance(value, RangeSweep):
            floats = any(isinstance(v, float) for v in (value.start, value.stop, value.step))
            space[name] = d.DiscreteUniformDistribution(value.start, value.stop, value.step) if floats else \
                d.IntUniformDistribution(int(value.start), int(value.stop), step=int(value.step))
        elif isinstance(value, IntervalSweep):
            ints = isinstance(value.start, int) and isinstance(value.end, int)
            log = "log" in value.tags
            kind = (d.IntLogUniformDistribution if log else d.IntUniformDistribution) if ints else \
                (d.LogUniformDistribution if log else d.UniformDistribution)
            space[name] = kind(value.start, value.end)
    return {name: dist for name, dist in space.items() if name not in fixed}


def check_trials(study: Any, space: dict[str, Any], file: str, setting: str) -> None:
    """Raises ConfigError for a trial the sweeper would fail on: one waiting (enqueued), or one that sampled a
    parameter of ``space`` from another distribution."""
    from optuna.distributions import check_distribution_compatibility
    from optuna.trial import TrialState

    for trial in study.get_trials(deepcopy=False):
        if trial.state is TrialState.WAITING:
            raise ConfigError(f"{setting} is invalid: {file} holds trial {trial.number} waiting to run (enqueued, "
                              "with values of its own), which no sweep of the lab writes")
        for name, distribution in trial.distributions.items():
            try:
                if name in space:
                    check_distribution_compatibility(distribution, space[name])
            except ValueError:
                raise ConfigError(f"{setting} is invalid: {file} holds trial {trial.number}, which sampled {name} "
                                  f"from {distribution}, and this search samples it from {space[name]}: a study of "
                                  "another search") from None


def check_own_study(sweep_dir: Path, sweeper: Any, setting: str, trials_run: int, arguments: Sequence[str] = ()) \
        -> None:
    """Raises ConfigError unless the sweep's study can be continued: present (if trials ran), readable, its own,
    holding nothing the sweeper would fail on or run."""
    path = sqlite_path(sweeper.storage)
    if path is None:
        return  # a database server of the user's: its studies are the user's to manage
    check_storage_url(sweeper.storage, path, setting)
    if not path.exists() and not path.is_symlink():
        if trials_run:
            raise ConfigError(f"{setting} is invalid: its Optuna study {path.name} is missing, though {trials_run} "
                              "trials ran; a resume continues a study and does not start an empty one (start a new "
                              "sweep instead)")
        return
    check_database(path, setting)
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name=str(sweeper.study_name), storage=str(sweeper.storage))
        owner = study.user_attrs.get(SWEEP_ID_ATTRIBUTE)
    except Exception as err:  # noqa: BLE001 - SQLAlchemy's and Optuna's errors alike: the file is not our study
        raise ConfigError(f"{setting} is invalid: {path.name} is not a readable Optuna study with study_name="
                          f"{sweeper.study_name} ({type(err).__name__})") from None
    own = read_sweep_id(sweep_dir, setting)
    if owner != own:
        raise ConfigError(f"{setting} is invalid: its {path.name} holds the study of another sweep (stamped "
                          f"{owner or 'by no sweep'}, this sweep is {own or 'unstamped'}); a resume continues only "
                          "its own study")
    from attention_lab.run.sweep_jobs import params_arguments

    check_trials(study, search_space([*params_arguments(sweeper.get("params")), *arguments]), path.name, setting)
