"""A registry of classes by name that knows every name from its package's sources and imports a class on first use.

A class joins by a decorator call at the top of its module, ``@register("name")`` (attention variants) or
``@register_task("name")`` (tasks): one new file, no list to edit. The names are read from those decorator lines
without importing anything, so listing the variants (``--help``, the config checks, did-you-mean) costs no import,
and a run imports only the modules of the classes it builds. The decorator itself adds the class when its module is
imported (:meth:`LazyRegistry.add`); looking a name up imports the module whose source declares it.
"""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Generic, TypeVar

C = TypeVar("C")


def declaration_pattern(decorator: str) -> re.Pattern[str]:
    """``@<decorator>("name")`` on its own line above a class (other decorators may come between): its matches are
    (name, class name). The one reading of a registration; the config checks read a variant's class by it too."""
    return re.compile(rf"""^@{re.escape(decorator)}\(\s*["']([^"']+)["']\s*\)\s*\n(?:@.*\n)*class (\w+)""",
                      re.MULTILINE)


class LazyRegistry(Mapping[str, C], Generic[C]):
    """Name -> class for the classes of ``package`` (its modules: the ``*.py`` files of ``directory``) that are
    decorated with ``@<decorator>("name")``. Iterating names imports nothing; getting a class imports its module."""

    def __init__(self, package: str, directory: Path, decorator: str) -> None:
        self.package = package
        self.directory = directory
        self.declaration = declaration_pattern(decorator)
        self.classes: dict[str, C] = {}  # the classes registered so far (their modules are imported)

    @functools.cached_property
    def modules(self) -> dict[str, str]:
        """Name -> the module that declares it, from the sources (in the order a package import would visit them)."""
        return {name: f"{self.package}.{path.stem}" for path in sorted(self.directory.glob("*.py"))
                for name, _ in self.declaration.findall(path.read_text(encoding="utf-8"))}

    def add(self, name: str, cls: C) -> None:
        """What the decorator does when the class's module is imported."""
        self.classes[name] = cls

    def name_of(self, cls: type) -> str | None:
        """The name ``cls`` was registered under, among the classes imported so far (an instance's class is one)."""
        return next((name for name, registered in self.classes.items() if registered is cls), None)

    def __getitem__(self, name: str) -> C:
        if name not in self.classes and name in self.modules:
            importlib.import_module(self.modules[name])
        return self.classes[name]

    def __contains__(self, name: object) -> bool:
        return name in self.classes or name in self.modules

    def __iter__(self) -> Iterator[str]:
        return iter({**dict.fromkeys(self.modules), **dict.fromkeys(self.classes)})

    def __len__(self) -> int:
        return len({*self.modules, *self.classes})
