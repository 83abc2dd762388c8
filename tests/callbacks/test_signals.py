"""Inside StopSignals.raising, the first signal ends the work at once, wherever it lands."""

from __future__ import annotations

import io
import logging
import os
import signal
import threading

import pytest

from attention_lab.callbacks.signals import StopSignals

pytestmark = pytest.mark.skipif(threading.current_thread() is not threading.main_thread(),
                                reason="signals reach only the main thread")


class Interrupted(Exception):
    pass


class SignalWhileWriting(io.StringIO):
    """A stream that receives SIGTERM in the middle of a write: inside logging.StreamHandler.emit, whose
    ``except Exception`` hands any Exception to handleError, which prints it and goes on."""

    def write(self, text: str) -> int:
        os.kill(os.getpid(), signal.SIGTERM)
        return super().write(text)


def test_a_signal_inside_a_logging_call_is_not_swallowed_by_the_handler():
    logger = logging.getLogger("test_signals.writing")
    logger.propagate = False
    handler = logging.StreamHandler(SignalWhileWriting())
    logger.addHandler(handler)
    try:
        with StopSignals() as stop, pytest.raises(Interrupted) as raised, stop.raising(Interrupted):
            logger.warning("a long validation")
            pytest.fail("the signal did not stop the work")
        assert stop.signum == signal.SIGTERM and raised.value.args == (signal.SIGTERM,)
    finally:
        logger.removeHandler(handler)


def test_a_signal_just_before_raises_on_entry():
    with StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(Interrupted):
            with stop.raising(Interrupted):
                pytest.fail("entered after the signal")


def test_outside_raising_a_signal_only_asks_to_stop():
    with StopSignals() as stop:
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.signum == signal.SIGTERM
