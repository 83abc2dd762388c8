"""Whether the user asked for tracebacks: ``HYDRA_FULL_ERROR=1`` as the user typed it.

scripts/train.py sets ``HYDRA_FULL_ERROR=1`` for Hydra itself, so that Hydra hands its errors (a typo in an
override, an unknown option) to the lab, which says them in one line, instead of printing several. The user's own
choice travels in :data:`USER_FULL_ERROR`, set once by :func:`hand_errors_to_lab` and inherited by every process
the run starts (sweep jobs, a resumed sweep's relaunch).
"""

from __future__ import annotations

import os

HYDRA_FULL_ERROR = "HYDRA_FULL_ERROR"
USER_FULL_ERROR = "ATTENTION_LAB_FULL_ERROR"


def full_error_requested() -> bool:
    """True when the user set HYDRA_FULL_ERROR=1 (outside scripts/train.py: HYDRA_FULL_ERROR as it is)."""
    return os.environ.get(USER_FULL_ERROR, os.environ.get(HYDRA_FULL_ERROR)) == "1"


def hand_errors_to_lab() -> None:
    """Keep the user's choice, then let Hydra raise its errors instead of printing them."""
    os.environ.setdefault(USER_FULL_ERROR, "1" if os.environ.get(HYDRA_FULL_ERROR) == "1" else "0")
    os.environ[HYDRA_FULL_ERROR] = "1"
