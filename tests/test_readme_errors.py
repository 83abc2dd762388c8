"""The docs' examples of bad settings (docs/configuration.md, "A bad setting") print what the docs say they print."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import ROOT, TRAIN, run_in_process

DOCS = ROOT / "docs" / "configuration.md"


def documented_examples() -> list[tuple[list[str], str]]:
    """(arguments, error line) of each `$ python scripts/train.py ...` in the docs' "A bad setting" block."""
    text = DOCS.read_text()
    block = text[text.index("## A bad setting"):]
    block = block[block.index("```text") + len("```text"):]
    block = block[:block.index("```")]
    pairs = re.findall(r"^\$ python scripts/train\.py (.+)\n(error: .+)$", block, re.MULTILINE)
    return [(shlex.split(args), line) for args, line in pairs]


def test_the_docs_show_bad_settings():
    assert len(documented_examples()) >= 3


@pytest.mark.parametrize(("args", "line"), documented_examples(), ids=lambda value: " ".join(value)
                         if isinstance(value, list) else "")
def test_the_documented_error_lines_are_what_the_script_prints(args, line):
    proc = run_in_process(TRAIN, *args)  # the script's entry function, its exit status and console
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [line]
