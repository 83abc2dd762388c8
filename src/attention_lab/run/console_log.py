"""The console's log lines without control characters (configs/hydra/default.yaml sets this formatter for Hydra's
own lines and for the jobs'): they name a job's overrides and errors, which a resumed sweep reads from its record,
and a record must not send the terminal commands (an OSC sequence that sets its title, one that rewrites the
clipboard). See :func:`attention_lab.review.escape.console`."""

from __future__ import annotations

import logging

from attention_lab.review.escape import console


class ConsoleFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return console(super().format(record))
