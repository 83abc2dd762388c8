"""Exceptions raised in the other threads of a run, kept for the run's one error line instead of printed.

A run starts threads it does not write itself: TensorBoard's event writers (one per event file: Lightning's
logger, the attention tab's records) write on a thread of their own, and when a write fails (a full disk) that
thread ends with the error, which Python's default ``threading.excepthook`` prints to stderr as a traceback, before
the run's one ``error:`` line (the writer raises the same error again in the training thread at its next write).
:class:`ThreadErrors` replaces the hook, through its public API, for as long as the run runs: an error ending a
thread is kept, with its traceback, for the run's ``traceback.txt`` (run/task.py), and printed nowhere. The run
reports it as it reports its own errors: one line, and a run whose training thread ended well fails with the first
such error (an event writer that failed at its last flush lost the run's last events).

A failed write reaches the training thread before its writer thread has reported it: the writer stores the error,
wakes the training thread (which raises it again) and only then ends, through the hook. So before the run reads
the errors (and so before the hook is put back), the threads that the run started and that are still alive are
given :data:`SETTLE_S` seconds to end (:meth:`ThreadErrors.settle`): a failing thread is ending, and a run's own
threads (event writers, the image worker) are closed by then. Without it, a report that came after the hook was put
back was printed, and one that came after the traceback file was written was missing from it. (A run stopped by a
signal does not wait: it ends at once.)
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass
from types import TracebackType

SETTLE_S = 2.0  # how long the threads a run started may take to end, once it ends (see above)


@dataclass(frozen=True)
class ThreadError:
    """An exception that ended a thread: the thread's name, the exception, and its traceback as text (formatted
    when the thread ended: the training thread may raise the same exception again, which extends its traceback)."""

    thread: str
    error: BaseException
    text: str

    def report(self) -> str:
        return f"Exception in thread {self.thread}:\n{self.text}"


class ThreadErrors:
    """``threading.excepthook`` for the duration of a ``with`` block (the previous hook is put back after it): the
    errors that end threads meanwhile are kept in :attr:`errors`, in the order they came."""

    def __init__(self) -> None:
        self.errors: list[ThreadError] = []
        self.lock = threading.Lock()  # threads may end with an error at once
        self.previous = threading.excepthook
        self.before: set[threading.Thread] = set()  # the threads that were there before the run: not the run's

    def __enter__(self) -> ThreadErrors:
        self.previous = threading.excepthook
        self.before = set(threading.enumerate())
        threading.excepthook = self.keep
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        threading.excepthook = self.previous

    def settle(self, timeout: float = SETTLE_S) -> None:
        """Waits, at most ``timeout`` seconds in all, for the threads started since the block began to end."""
        deadline = time.monotonic() + timeout
        for thread in threading.enumerate():
            if thread not in self.before and thread is not threading.current_thread():
                thread.join(max(0.0, deadline - time.monotonic()))

    def keep(self, args: threading.ExceptHookArgs) -> None:
        """The hook: keeps the error (a thread that raises SystemExit just ends, as with Python's own hook)."""
        if args.exc_type is SystemExit or args.exc_value is None:
            return
        text = "".join(traceback.format_exception(args.exc_type, args.exc_value, args.exc_traceback))
        name = args.thread.name if args.thread is not None else "(unnamed)"
        with self.lock:
            self.errors.append(ThreadError(name, args.exc_value, text))

    def first(self) -> ThreadError | None:
        with self.lock:
            return self.errors[0] if self.errors else None

    def traceback_of(self, error: BaseException | None) -> str:
        """The text of a run's traceback file: ``error``'s traceback (the training thread's error; None: none
        written), then those of the threads that ended with another error. An error that a thread raised and the
        training thread raised again is written once, from the training thread: its traceback then holds both."""
        with self.lock:
            errors = list(self.errors)
        parts = []
        if error is not None:
            text = "".join(traceback.format_exception(error))
            raised_in = next((e.thread for e in errors if e.error is error), None)
            parts.append(text if raised_in is None else f"Exception in thread {raised_in}:\n{text}")
        parts.extend(e.report() for e in errors if e.error is not error)
        return "\n".join(parts)
