"""The shape of the code: small files, no import cycles inside the package, the package's floors (docs/development.md,
"Layout"), no issue numbers. Read from the sources with ``ast``: nothing is imported."""

from __future__ import annotations

import ast
import graphlib
import re
from pathlib import Path

import pytest

from conftest import ROOT

PACKAGE = ROOT / "src" / "attention_lab"
SOURCES = sorted([*PACKAGE.rglob("*.py"), *(ROOT / "scripts").rglob("*.py")])
MAX_LINES = 400
MAX_TOP_LEVEL = 12

# The floors of docs/development.md, from the bottom up: a room (a package, or a module at the top level) imports
# only rooms on its own floor or below.
FLOORS = (
    {"names", "errors", "lazy_registry", "startup_gc", "tensorboard_logger", "trainer_rules"},
    {"attention", "config", "notebooks", "data", "model"},
    {"analysis", "plotting"},
    {"records", "lit_module", "checks"},
    {"callbacks", "train"},
    {"review", "tensorboard_plugin", "findings"},
    {"run", "docs_tables"},
)


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> set[str]:
    """attention_lab modules that ``path`` imports, at the top level or inside its functions (a cycle through a
    deferred import is a cycle all the same: the two modules cannot be understood apart)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return {name for name in found if name.startswith("attention_lab")}


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Each module of ``package`` -> the package's modules it imports (a package's ``__init__`` importing its own
    modules, how registries load their entries, left out)."""
    modules = {module_name(p, package): p for p in package.rglob("*.py")}
    graph = {name: {m for m in imports_of(path) if m in modules and m != name} for name, path in modules.items()}
    return {name: {m for m in deps if not m.startswith(name + ".")} for name, deps in graph.items()}


def room_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Which rooms import which: ``attention_lab.records.files`` is in ``records``, ``attention_lab.train`` is
    ``train``; the package's own ``__init__`` (what ``import attention_lab`` offers) aside."""
    rooms: dict[str, set[str]] = {}
    for name, deps in import_graph(package).items():
        if "." in name:
            room = name.split(".")[1]
            rooms.setdefault(room, set()).update({m.split(".")[1] for m in deps if "." in m} - {room})
    return rooms


def test_every_source_file_is_under_the_line_limit():
    long = {str(p.relative_to(ROOT)): n for p in SOURCES if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines: {long}"


def test_imports_inside_functions_count(tmp_path):
    source = tmp_path / "deferred.py"
    source.write_text("import os\n\ndef later():\n    from attention_lab.run import preflight\n")
    assert imports_of(source) == {"attention_lab.run", "attention_lab.run.preflight"}


def test_no_import_cycles_in_the_package():
    graph = import_graph()

    def cycle_from(start: str) -> list[str] | None:
        stack = [(start, [start])]
        while stack:
            node, path = stack.pop()
            for nxt in graph.get(node, ()):
                if nxt == start:
                    return path + [start]
                if nxt not in path:
                    stack.append((nxt, path + [nxt]))
        return None

    cycles = [c for name in graph if (c := cycle_from(name))]
    assert not cycles, f"import cycle: {' -> '.join(cycles[0])}"


def test_the_top_level_holds_at_most_twelve_modules():
    top = sorted(path.stem for path in PACKAGE.glob("*.py") if path.name != "__init__.py")
    assert len(top) <= MAX_TOP_LEVEL, top


def test_no_two_packages_import_each_other():
    """Of two rooms (packages, or a package and a top-level module), at most one imports the other, through any of
    their modules."""
    try:
        graphlib.TopologicalSorter(room_graph()).prepare()
    except graphlib.CycleError as err:
        pytest.fail(f"rooms that import each other: {' -> '.join(err.args[1])}")


def test_every_import_goes_to_the_same_floor_or_below():
    floor = {room: level for level, rooms in enumerate(FLOORS) for room in rooms}
    rooms = room_graph()
    assert set(rooms) <= set(floor), f"rooms on no floor (add them to FLOORS and the docs): {set(rooms) - set(floor)}"
    upward = sorted(f"{a} -> {b}" for a, deps in rooms.items() for b in deps if floor[b] > floor[a])
    assert not upward, f"imports up a floor: {upward}"


def test_the_room_checks_see_an_upward_import_and_a_two_way_tie(tmp_path):
    package = tmp_path / "attention_lab"
    for folder in ("records", "review"):
        (package / folder).mkdir(parents=True)
        (package / folder / "__init__.py").write_text("")
    (package / "records" / "files.py").write_text("from attention_lab.review import sweep\n")
    (package / "review" / "sweep.py").write_text("def later():\n    from attention_lab.records.files import x\n")
    assert room_graph(package) == {"records": {"review"}, "review": {"records"}}
    with pytest.raises(graphlib.CycleError):
        graphlib.TopologicalSorter(room_graph(package)).prepare()


def test_every_module_says_what_it_is():
    """docs/development.md's table of modules is the first sentence of each docstring (make docs)."""
    bare = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py") if not ast.get_docstring(ast.parse(p.read_text()))]
    assert not bare, bare


def test_nothing_names_issue_numbers():
    texts = [*SOURCES, *(ROOT / "configs").rglob("*.yaml"), ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    pattern = re.compile(r"\b(issue|Issue|GitHub issue)\s*#?\d+|\b[\w.-]+/[\w.-]+#\d+")
    named = [str(p.relative_to(ROOT)) for p in texts if pattern.search(p.read_text())]
    assert not named, f"issue numbers in {named}"
