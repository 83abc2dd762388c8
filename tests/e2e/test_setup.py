"""`make setup`, the first step of the README's two commands, into a venv of the test's own: uv installs the project
(no pip fallback note), and the venv gets no pip of its own where the interpreter's pip can install into it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import ROOT


def interpreter_pip_installs_elsewhere(python: str) -> bool:
    """Whether `python -m pip --python <path>` works (pip >= 22.3): then the Makefile seeds no pip into the venv."""
    path = shutil.which(python)
    return path is not None and subprocess.run([path, "-m", "pip", "--python", path, "--version"],
                                               capture_output=True).returncode == 0


@pytest.mark.timeout(600)
def test_make_setup_installs_with_uv_into_a_venv_without_pip(tmp_path: Path):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    venv = tmp_path / "venv"
    proc = subprocess.run(["make", "--no-print-directory", "setup", f"VENV={venv}"], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert "note:" not in output, output[-3000:]  # the pip fallback says why it runs
    assert (venv / ".installed").is_file()
    if interpreter_pip_installs_elsewhere("python3"):
        assert not (venv / "bin" / "pip").exists(), "the venv got a pip of its own"
    # The project (editable) and torch are installed; importing torch itself would compile its bytecode first.
    check = subprocess.run([venv / "bin" / "python", "-c", "import attention_lab, importlib.metadata as m; "
                            "print(attention_lab.__file__, m.version('torch'))"], capture_output=True, text=True)
    assert check.returncode == 0, check.stderr[-3000:]
    assert check.stdout.startswith(str(ROOT / "src" / "attention_lab")), check.stdout  # editable: this checkout
