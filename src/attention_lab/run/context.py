"""What the run itself decides, beside the config it was given: the config is input and stays as composed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class RunContext:
    """Decided by :class:`attention_lab.run.task.RunTask` and handed to :func:`attention_lab.train.train`."""

    name: str = ""  # the run's overrides (attention_lab.run.overrides.run_name): its TensorBoard run, its map titles
    shown_hparams: tuple[str, ...] = ()  # what a sweep job's sweep varies: HParams columns beside every knob
    resume_from: Path | None = None  # the run dir whose checkpoints this run continues from; None = from step 0
    run_dir: Path | None = None  # the run's own dir (Hydra's output dir), the only place it writes; None = paths.output_dir
