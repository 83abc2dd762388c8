"""Every printed result of the reference notebooks, recomputed with the attention library."""

from __future__ import annotations

import pytest
import torch

from attention_lab.notebooks import EXAMPLES, NOTEBOOKS, compare
from conftest import ROOT, run_in_process


def test_examples_cover_every_notebook():
    assert {e.notebook for e in EXAMPLES} == set(NOTEBOOKS)
    names = [e.name for e in EXAMPLES]
    assert len(names) == len(set(names)), "example names must be unique"


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.name for e in EXAMPLES])
def test_example_matches_notebook(example):
    with torch.no_grad():
        result = compare(example)
    assert result.ours.shape == result.expected.shape
    assert result.ok, (
        f"{example.name}: max |ours - notebook| = {result.max_error:.3g} > tolerance {example.tolerance}\n"
        f"ours:\n{result.ours}\nnotebook:\n{result.expected}"
    )


def test_examples_leave_global_rng_alone():
    torch.manual_seed(0)
    before = torch.get_rng_state()
    with torch.no_grad():
        for example in EXAMPLES:
            example.compute()
    assert torch.equal(torch.get_rng_state(), before)


def test_reproduce_script_exits_0_and_prints_ticks(monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    result = run_in_process(ROOT / "scripts" / "reproduce.py")
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("✓") >= len(EXAMPLES)
    assert "✗" not in result.stdout


def test_reproduce_script_filters_by_notebook(monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    result = run_in_process(ROOT / "scripts" / "reproduce.py", "--notebook", "002")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "002 weights" in result.stdout
    assert "001 SelfAttention" not in result.stdout
