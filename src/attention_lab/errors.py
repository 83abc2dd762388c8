"""The project's own exceptions: a bad setting, a run or sweep dir a reader cannot use, and the two ways a run ends
early that are not bugs."""

from __future__ import annotations

import signal
from pathlib import Path


class ConfigError(ValueError):
    """A setting that cannot work; the message is one line naming the setting and what is allowed."""


class ReviewError(ValueError):
    """A run or sweep dir, or a review script's argument, that a reader cannot use (missing checkpoint, malformed
    record, ...); the message is one line. Raised where run dirs are read (records/) and by the review tools."""


class TrainingInterrupted(Exception):
    """SIGINT/SIGTERM: the run stopped, after saving ``checkpoint`` when there was a step to save."""

    def __init__(self, signum: int, step: int, checkpoint: Path | None, detail: str = "") -> None:
        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        saved = f"checkpoint saved to {checkpoint}" if checkpoint else detail or "no new checkpoint was saved"
        super().__init__(f"{signal.Signals(signum).name} at step {step}: {saved}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum  # the shell's convention: 130 for SIGINT, 143 for SIGTERM


class TrainingDiverged(Exception):
    """A nan/inf training loss: the run stopped before the bad update; ``checkpoint`` is the last good one."""

    def __init__(self, loss: float, step: int, checkpoint: Path | None, checkpoint_step: int | None = None) -> None:
        self.loss, self.step, self.checkpoint, self.checkpoint_step = loss, step, checkpoint, checkpoint_step
        at = f" (step {checkpoint_step})" if checkpoint_step is not None else ""
        kept = f"the last checkpoint, {checkpoint}{at}, is kept as it was" if checkpoint else "no checkpoint had been saved yet"
        super().__init__(f"training diverged: the loss is {loss} at step {step}; stopped before updating the "
                         f"weights with it; {kept}; try a lower lr")
