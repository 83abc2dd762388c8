"""An Optuna sweep's study belongs to its sweep dir: stamped when the sweep starts, checked when it resumes.

The study lives in ``<sweep dir>/optuna.db`` (configs/hparams_search/optuna.yaml). A study copied from another
sweep would mix two searches, a deleted one would silently start from nothing, and a corrupt one ends in a deep
SQLAlchemy traceback: each is refused in one line before anything runs. The stamp is an id kept in the sweep
dir (``.sweep_id``), so a sweep dir moved or copied as a whole still owns its study.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from attention_lab.errors import ConfigError

SWEEP_ID = ".sweep_id"
STAMP = "attention_lab.sweep_id"  # the study's user attribute


def sqlite_path(storage: Any) -> Path | None:
    """The file of a ``sqlite:///<path>`` storage; None for any other storage."""
    prefix = "sqlite:///"
    return Path(str(storage)[len(prefix):]) if str(storage).startswith(prefix) else None


def stamp(sweep_dir: Path, sweeper: Any) -> None:
    """A new Optuna sweep: its id in the sweep dir, and the same id on its study (created now, as the sweeper
    would create it: it then loads this one)."""
    import optuna

    sweep_id = uuid.uuid4().hex
    (sweep_dir / SWEEP_ID).write_text(sweep_id + "\n")
    study = optuna.create_study(storage=str(sweeper.storage), study_name=str(sweeper.study_name),
                                direction=str(sweeper.direction), load_if_exists=True)
    study.set_user_attr(STAMP, sweep_id)


def check_own_study(sweep_dir: Path, sweeper: Any, setting: str, trials_run: int) -> None:
    """Raises ConfigError unless the sweep's study can be continued: present (if trials ran), readable, its own."""
    path = sqlite_path(sweeper.storage)
    if path is None:
        return  # a database server of the user's: its studies are the user's to manage
    if not path.is_file():
        if trials_run:
            raise ConfigError(f"{setting} is invalid: its Optuna study {path.name} is missing, though {trials_run} "
                              "trials ran; a resume continues a study and does not start an empty one (start a new "
                              "sweep instead)")
        return
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optuna.load_study(study_name=str(sweeper.study_name), storage=str(sweeper.storage))
        owner = study.user_attrs.get(STAMP)
    except Exception as err:  # noqa: BLE001 - SQLAlchemy's and Optuna's errors alike: the file is not our study
        raise ConfigError(f"{setting} is invalid: {path.name} is not a readable Optuna study with study_name="
                          f"{sweeper.study_name} ({type(err).__name__})") from None
    own = (sweep_dir / SWEEP_ID).read_text().strip() if (sweep_dir / SWEEP_ID).is_file() else None
    if owner != own:
        raise ConfigError(f"{setting} is invalid: its {path.name} holds the study of another sweep (stamped "
                          f"{owner or 'by no sweep'}, this sweep is {own or 'unstamped'}); a resume continues only "
                          "its own study")
