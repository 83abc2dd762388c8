"""Text from a sweep's records made safe for each place the review tools write it. Overrides, errors, metric
names and directory names are data that anyone could have written: a spreadsheet must not run them as a formula,
a Markdown table must keep its columns and render no HTML, a terminal must not run their escape sequences, and
rich must not read them as markup (matplotlib's math text is turned off where the labels are drawn: see
``parse_math=False`` in the bar chart)."""

from __future__ import annotations

import re
from typing import Any

# OWASP's CSV injection rule: a cell starting with one of these is a formula to Excel, LibreOffice and Sheets.
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# Not "_": metric names such as val/seq_acc stay readable in the raw file (an underscore inside a word
# emphasises nothing).
MARKDOWN_SPECIAL = re.compile(r"([\\`*\[\]|])")
# C0, DEL and C1: ESC (and C1's CSI, OSC) start a terminal's commands (set its title, move the cursor, rewrite
# the clipboard); CR and backspace overwrite what the line said.
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]+")
TERMINAL_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f]+")  # a tab only moves the cursor on


def csv_cell(value: Any) -> Any:
    """A value for csv.writer: numbers stay numbers (-0.25, nan, -inf: written by the lab, not by a user); text
    that a spreadsheet would run as a formula gets a leading apostrophe, which shows the text as it is."""
    if value is None or isinstance(value, (bool, int, float)):
        return value
    cell = str(value)
    return "'" + cell if cell.startswith(FORMULA_START) else cell


def one_line(text: str) -> str:
    """Newlines, tabs and other control characters as one space: a table cell is one line."""
    return CONTROL.sub(" ", text)


def console(text: object) -> str:
    """Text for a terminal, each of its lines without control characters but tabs (a run as one space): every
    console line that holds anything from a record (an override, an error, a name) goes through here, so that a
    record cannot send the terminal commands."""
    return "\n".join(TERMINAL_CONTROL.sub(" ", line) for line in str(text).split("\n"))


def html(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def markdown_cell(text: str) -> str:
    """Text for a Markdown table cell or caption: one line, HTML shown as text, and Markdown's own characters
    (``|`` that would end the cell, ``*``, code and link brackets) escaped with a backslash."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", html(one_line(text)))


def markdown_code(text: str) -> str:
    """Text as a code span in a table cell, where backslashes are literal and only ``|`` is escaped (GitHub's
    tables split on it even there). Text with a backtick, which would end the span, or with ``<>&``, which a
    code span shows but a reader of the raw file should not meet unescaped, is set as escaped plain text."""
    line = one_line(text)
    if any(c in line for c in "`<>&"):
        return markdown_cell(line)
    return "`" + line.replace("|", "\\|") + "`"
