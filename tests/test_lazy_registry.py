"""The registries of variants and tasks know every name from the sources and import a class on first use: listing
the names imports nothing, and a run imports the variant and the task it builds, not the others."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from attention_lab.lazy_registry import LazyRegistry
from conftest import ROOT, script_env

# A package of two modules, each registering classes the way the variants and tasks do, and one that does not.
MODULES = {
    "__init__.py": "",
    "registry.py": '''
        from pathlib import Path
        from attention_lab.lazy_registry import LazyRegistry

        SHAPES = LazyRegistry("shapes", Path(__file__).resolve().parent, "shape")

        def shape(name):
            def decorator(cls):
                SHAPES.add(name, cls)
                return cls
            return decorator
    ''',
    "round.py": '''
        from shapes.registry import shape

        @shape("circle")
        class Circle:
            pass

        @shape('disc')
        class Disc:
            pass
    ''',
    "square.py": '''
        from shapes.registry import shape

        @shape("square")
        class Square:
            pass
    ''',
    "helpers.py": '''
        # shape("not_a_declaration"): a mention, not a decorator line
        VALUE = 1
    ''',
}


@pytest.fixture
def shapes(tmp_path, monkeypatch):
    """The package ``shapes`` in ``tmp_path``, imported fresh; its registry and the loaded module names."""
    package = tmp_path / "shapes"
    package.mkdir()
    for name, text in MODULES.items():
        (package / name).write_text(textwrap.dedent(text).lstrip())
    monkeypatch.syspath_prepend(str(tmp_path))
    for name in [m for m in sys.modules if m == "shapes" or m.startswith("shapes.")]:
        monkeypatch.delitem(sys.modules, name)
    from shapes.registry import SHAPES

    yield SHAPES, lambda: sorted(m for m in sys.modules if m.startswith("shapes.") and m != "shapes.registry")
    for name in [m for m in sys.modules if m == "shapes" or m.startswith("shapes.")]:
        del sys.modules[name]


def test_the_names_come_from_the_sources_without_an_import(shapes):
    registry, loaded = shapes
    assert list(registry) == ["circle", "disc", "square"]  # the modules in order, each class in its order
    assert len(registry) == 3 and "square" in registry and "triangle" not in registry
    assert "not_a_declaration" not in registry
    assert loaded() == []


def test_a_class_is_imported_with_its_module_on_first_use(shapes):
    registry, loaded = shapes
    square = registry["square"]
    assert square.__name__ == "Square" and square.__module__ == "shapes.square"
    assert loaded() == ["shapes.square"]
    assert registry.name_of(square) == "square" and registry.name_of(int) is None
    assert registry.get("circle").__name__ == "Circle"
    assert loaded() == ["shapes.round", "shapes.square"]
    with pytest.raises(KeyError):
        registry["triangle"]


def test_a_class_registered_outside_the_sources_joins(shapes):
    registry, _ = shapes

    class Triangle:
        pass

    registry.add("triangle", Triangle)
    assert list(registry) == ["circle", "disc", "square", "triangle"] and registry["triangle"] is Triangle


def test_a_package_without_declarations_has_no_names(tmp_path):
    (tmp_path / "plain.py").write_text("class Plain:\n    pass\n")
    registry = LazyRegistry("nowhere", tmp_path, "shape")
    assert list(registry) == [] and len(registry) == 0 and "plain" not in registry


# In a fresh interpreter: what building multihead and the reverse task imports of the two packages.
PROGRAM = """
import json, sys
import attention_lab.attention as attention
from attention_lab.data.tasks import TASK_REGISTRY, build_task
names = {"variants": list(attention.VARIANTS), "tasks": sorted(TASK_REGISTRY)}
attention.build_attention("multihead", d_in=4, d_out=4, num_heads=2)
build_task("reverse")
names["imported"] = sorted(m for m in sys.modules if m.startswith(("attention_lab.attention.", "attention_lab.data.tasks.")))
print(json.dumps(names))
"""


def test_building_one_variant_and_one_task_imports_only_theirs():
    proc = subprocess.run([sys.executable, "-c", PROGRAM], env=script_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    shown = json.loads(proc.stdout.strip().splitlines()[-1])
    package = ROOT / "src" / "attention_lab"

    def declared(folder: Path, decorator: str) -> list[str]:
        return sorted(line.split('"')[1] for path in folder.glob("*.py") for line in path.read_text().splitlines()
                      if line.startswith(f'@{decorator}("'))

    assert shown["variants"] == declared(package / "attention", "register")
    assert {"multihead", "mamba2", "cross"} <= set(shown["variants"])
    assert shown["tasks"] == declared(package / "data" / "tasks", "register_task") and "copy" in shown["tasks"]
    variants = {m.rsplit(".", 1)[1] for m in shown["imported"] if m.startswith("attention_lab.attention.")}
    tasks = {m.rsplit(".", 1)[1] for m in shown["imported"] if m.startswith("attention_lab.data.tasks.")}
    assert "multihead" in variants and not variants & {"mamba2", "cross", "simple", "linear", "diff", "mla"}
    assert tasks == {"base", "reverse"}
