"""Python's cyclic garbage collector, paused while a run starts.

Starting a run imports torch and Lightning (about 3,500 modules) and builds the config, data and model: objects
that live as long as the process, which every full collection would traverse again. The collector is paused from
the command line's start until training begins; then what exists is frozen (``gc.freeze``: left out of every
later collection) and collection resumes for what training allocates. The start-up's own cyclic garbage, created
once per process, is frozen with it.
"""

from __future__ import annotations

import gc


def pause() -> None:
    gc.disable()


def resume() -> None:
    """Where :func:`pause` stopped the collector (a no-op otherwise, e.g. for a second job in one process)."""
    if not gc.isenabled():
        gc.freeze()
        gc.enable()
