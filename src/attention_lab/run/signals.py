"""SIGINT, SIGTERM (and SLURM's SIGUSR2) during a run: the first one asks training to stop at the end of the
current step (:class:`attention_lab.callbacks.graceful_stop.GracefulStop` saves a checkpoint); a second Ctrl-C
aborts."""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

log = logging.getLogger(__name__)


class StopSignals:
    """Context manager; ``signum`` is the first signal received inside it, or None."""

    # SIGUSR2: submitit's warning to a SLURM job, `signal_delay_s` before its time limit (or on preemption).
    # Handled here, the run stops at the end of a step with a checkpoint; submitit's own handler would end it
    # mid-step, recorded as failed.
    SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR2)

    def __init__(self) -> None:
        self.signum: int | None = None
        self.aborted = False  # a second Ctrl-C: stop now, without saving
        self.previous: dict[int, object] = {}

    def handler(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            if signum == signal.SIGINT:
                self.aborted = True
                raise KeyboardInterrupt
            return
        self.signum = signum
        log.warning("%s received: stopping at the end of this step and saving checkpoints/last.ckpt "
                    "(Ctrl-C again aborts without saving)", signal.Signals(signum).name)

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():  # signals reach only the main thread
            self.previous = {s: signal.signal(s, self.handler) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self.previous.items():
            signal.signal(signum, previous)
        self.previous = {}
