"""The shape of the code: small files, no import cycles inside the package, no issue numbers."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import ROOT

PACKAGE = ROOT / "src" / "attention_lab"
SOURCES = sorted([*PACKAGE.rglob("*.py"), *(ROOT / "scripts").rglob("*.py")])
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
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


def test_every_source_file_is_under_the_line_limit():
    long = {str(p.relative_to(ROOT)): n for p in SOURCES if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"files over {MAX_LINES} lines: {long}"


def test_imports_inside_functions_count(tmp_path):
    source = tmp_path / "deferred.py"
    source.write_text("import os\n\ndef later():\n    from attention_lab.run import preflight\n")
    assert imports_of(source) == {"attention_lab.run", "attention_lab.run.preflight"}


def test_no_import_cycles_in_the_package():
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {name: {m for m in imports_of(path) if m in modules and m != name} for name, path in modules.items()}
    # A package's __init__ importing its own modules is how registries load their entries: not a cycle.
    graph = {name: {m for m in deps if not (m.startswith(name + "."))} for name, deps in graph.items()}

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


def test_nothing_names_issue_numbers():
    texts = [*SOURCES, *(ROOT / "configs").rglob("*.yaml"), ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]
    pattern = re.compile(r"\b(issue|Issue|GitHub issue)\s*#?\d+|\b[\w.-]+/[\w.-]+#\d+")
    named = [str(p.relative_to(ROOT)) for p in texts if pattern.search(p.read_text())]
    assert not named, f"issue numbers in {named}"
