"""SIGINT, SIGTERM (and SLURM's SIGUSR2) during a run: the first one asks training to stop at the end of the
current step (:class:`attention_lab.callbacks.lifecycle.GracefulStop` saves a checkpoint); a second Ctrl-C
aborts. Where nothing is left to save (the final validation, with its ablation passes), the first one stops the
run at once (:meth:`StopSignals.raising`)."""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
from collections.abc import Callable, Iterator
from types import FrameType

log = logging.getLogger(__name__)


class StopNow(BaseException):
    """The first signal inside :meth:`StopSignals.raising`, raised where the run is. A BaseException, as
    KeyboardInterrupt is, so that no ``except Exception`` on its way (a logging handler writing a line, a library's
    guard) swallows it; :meth:`StopSignals.raising` turns it into the run's own exception."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


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
        self.at_once = False  # inside raising()

    def handler(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:
            if signum == signal.SIGINT:
                self.aborted = True
                raise KeyboardInterrupt
            return
        self.signum = signum
        if self.at_once:
            raise StopNow(signum)
        log.warning("%s received: stopping at the end of this step and saving checkpoints/last.ckpt "
                    "(Ctrl-C again aborts without saving)", signal.Signals(signum).name)

    @contextlib.contextmanager
    def raising(self, interruption: Callable[[int], BaseException]) -> Iterator[None]:
        """Inside, the first signal raises ``interruption(signum)`` at once, wherever the run is (as Ctrl-C raises
        KeyboardInterrupt): for work after the last step, which has nothing to save and need not be finished."""
        if self.signum is not None:  # it came just before
            raise interruption(self.signum)
        self.at_once = True
        try:
            yield
        except StopNow as stop:
            raise interruption(stop.signum) from None
        finally:
            self.at_once = False

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():  # signals reach only the main thread
            self.previous = {s: signal.signal(s, self.handler) for s in self.SIGNALS}
        return self

    def __exit__(self, *exc_info: object) -> None:
        for signum, previous in self.previous.items():
            signal.signal(signum, previous)
        self.previous = {}
