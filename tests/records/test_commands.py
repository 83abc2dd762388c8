"""How the lab writes a command for a person to paste (attention_lab.records.commands): `python` only where the shell's
PATH finds the running interpreter's bin dir, paths as a user types them."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from attention_lab.records.commands import SCRIPTS, interpreter, script_command, shown_path
from conftest import ROOT


def test_python_is_named_only_where_the_shell_finds_this_interpreter_there(tmp_path, monkeypatch):
    bin_dir = Path(os.path.abspath(sys.executable)).parent
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    if shutil.which("python") is None:
        pytest.skip(f"{bin_dir} has no `python`")
    assert interpreter() == "python"  # an activated venv: its bin dir first on PATH
    monkeypatch.setenv("PATH", str(tmp_path))  # no python at all (`python: command not found`)
    assert interpreter(cwd=tmp_path) == os.path.abspath(sys.executable)
    assert interpreter(cwd=bin_dir.parent) == f"{bin_dir.name}/{Path(sys.executable).name}"
    # A link to this interpreter elsewhere is another interpreter to the shell (a venv's bin/python is a link to the
    # base interpreter, which has none of the venv's packages): the path is never resolved through links.
    (tmp_path / "python").symlink_to(sys.executable)
    assert interpreter(cwd=tmp_path) == os.path.abspath(sys.executable)


def test_a_venv_interpreter_is_not_confused_with_the_one_it_links_to(tmp_path, monkeypatch):
    """A venv's python run by path (`make train`) while PATH finds the base interpreter, whose real path is the
    venv python's target: the command names the venv's."""
    base = tmp_path / "base" / "bin"
    base.mkdir(parents=True)
    (base / "python").symlink_to(os.path.realpath(sys.executable))
    venv_python = tmp_path / "project" / ".venv" / "bin" / "python"
    venv_python.parent.mkdir(parents=True)
    venv_python.symlink_to(base / "python")
    monkeypatch.setattr(sys, "executable", str(venv_python))
    monkeypatch.setenv("PATH", str(base))
    assert interpreter(cwd=tmp_path / "project") == ".venv/bin/python"
    monkeypatch.setenv("PATH", f"{venv_python.parent}{os.pathsep}{base}")  # activated
    assert interpreter(cwd=tmp_path / "project") == "python"


def test_a_script_is_named_relative_to_the_working_dir_below_it_else_absolute():
    words = script_command("visualize.py", "a run", "--text", "it's", cwd=ROOT).split(" ", 1)[1]
    assert words == "scripts/visualize.py 'a run' --text 'it'\"'\"'s'"
    assert script_command("compare.py", cwd=ROOT.parent).endswith(f" {ROOT.name}/scripts/compare.py")
    assert script_command("compare.py", cwd=ROOT / "outputs").endswith(f" {SCRIPTS / 'compare.py'}")
    assert (SCRIPTS / "compare.py").is_file()
    assert shown_path(ROOT / "outputs" / "runs", cwd=ROOT) == Path("outputs/runs")
    assert shown_path(ROOT, cwd=ROOT / "outputs") == ROOT
