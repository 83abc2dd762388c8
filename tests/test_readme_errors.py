"""The README's examples of bad settings print what the README says they print."""

from __future__ import annotations

import re
import shlex

import pytest

from conftest import ROOT, TRAIN, run_script


def readme_examples() -> list[tuple[list[str], str]]:
    """(arguments, error line) of each `$ python scripts/train.py ...` in the README's "A bad setting" block."""
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("**A bad setting**"):]
    block = block[block.index("```text") + len("```text"):]
    block = block[:block.index("```")]
    pairs = re.findall(r"^\$ python scripts/train\.py (.+)\n(error: .+)$", block, re.MULTILINE)
    return [(shlex.split(args), line) for args, line in pairs]


def test_the_readme_shows_bad_settings():
    assert len(readme_examples()) >= 3


@pytest.mark.parametrize(("args", "line"), readme_examples(), ids=lambda value: " ".join(value)
                         if isinstance(value, list) else "")
def test_the_readme_error_lines_are_what_the_script_prints(args, line):
    proc = run_script(TRAIN, *args)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [line]
