"""plotting/ is the one home of figure code: no module of the package outside it imports matplotlib, and plotting/
imports none of the packages that read or write records (it sits low in the floors of docs/development.md, so that
any of them can draw and none has to be imported to draw). Read from the sources with ``ast``: every import counts,
a function's own and a ``TYPE_CHECKING`` one included. Nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "src" / "attention_lab"
PLOTTING = PACKAGE / "plotting"
# What plotting/ may not import: the packages above it, which hand it plain data.
ABOVE_PLOTTING = ("review", "callbacks", "run", "records", "tensorboard_plugin")


def imports_of(path: Path, root: Path = PACKAGE) -> set[str]:
    """Every module ``path`` (a file of the package at ``root``) imports, anywhere in the file, as absolute dotted
    names (a relative import resolved against the file's package; ``importlib.import_module("x")`` with a literal
    name counted too)."""
    package = path.relative_to(root.parent).parent.parts
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join([*package[:len(package) - node.level + 1], *([node.module] if node.module else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and getattr(node.func, "attr", getattr(node.func, "id", None)) in ("import_module", "__import__")):
            found.add(node.args[0].value)
    return found


def under(name: str, top: str) -> bool:
    return name == top or name.startswith(top + ".")


def matplotlib_importers(package: Path = PACKAGE) -> list[str]:
    """The package's modules outside plotting/ that import matplotlib, as paths relative to the package."""
    return sorted(str(path.relative_to(package)) for path in package.rglob("*.py")
                  if (package / "plotting") not in path.parents
                  and any(under(name, "matplotlib") for name in imports_of(path, package)))


def test_only_plotting_imports_matplotlib():
    drawing = matplotlib_importers()
    assert not drawing, f"modules outside plotting/ that import matplotlib (move the drawing into plotting/): {drawing}"


def test_plotting_imports_nothing_above_it():
    upward = {str(path.relative_to(PACKAGE)): sorted(name for name in imports_of(path)
                                                     if any(under(name, f"attention_lab.{top}") for top in ABOVE_PLOTTING))
              for path in PLOTTING.rglob("*.py")}
    upward = {path: names for path, names in upward.items() if names}
    assert not upward, f"plotting/ takes plain data; it imports {upward}"


@pytest.mark.parametrize("source", [
    "def draw():\n    from matplotlib.figure import Figure\n",
    "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from matplotlib.figure import Figure\n",
    "import matplotlib.pyplot as plt\n",
    "import importlib\n\ndef later():\n    return importlib.import_module('matplotlib.figure')\n",
])
def test_the_check_sees_every_way_to_import_matplotlib(tmp_path, source):
    """It can fail: a deferred, a type-only, a dotted and a dynamic import are each found; a file in plotting/ and a
    name that only starts like the library are not."""
    package = tmp_path / "attention_lab"
    (package / "review").mkdir(parents=True)
    (package / "plotting").mkdir()
    (package / "review" / "chart.py").write_text(source)
    (package / "plotting" / "bars.py").write_text(source)
    (package / "review" / "other.py").write_text("import matplotlibish\nfrom attention_lab.plotting import bars\n")
    assert matplotlib_importers(package) == ["review/chart.py"]


def test_a_relative_import_resolves_to_its_package(tmp_path):
    package = tmp_path / "attention_lab"
    (package / "plotting").mkdir(parents=True)
    (package / "plotting" / "bars.py").write_text("from ..review import sweep\nfrom . import heatmaps\n")
    assert imports_of(package / "plotting" / "bars.py", package) >= {"attention_lab.review.sweep",
                                                                      "attention_lab.plotting"}
