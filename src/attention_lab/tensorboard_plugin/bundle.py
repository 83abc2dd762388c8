"""The attention tab's ES modules as one script to write inline into a page opened from disk (a page from file://
loads no other file): each module becomes a function scope that returns its exports, after the modules it
imports, so the files stay as the tab serves them and their names never meet.

Only the forms the tab's files use are read: ``import { a, b } from "./x.js";`` on one line and ``export`` before a
declaration; anything else (``export default``, ``import.meta``, a dynamic ``import()``) is refused with the file's
name, never bundled half-read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

IMPORT = re.compile(r'^import \{([^}]*)\} from "\./([\w.-]+\.js)";[ \t]*\n?', re.MULTILINE)
EXPORTED = re.compile(r"^export (?:async function\*?|function\*?|const|let|class) (\w+)", re.MULTILINE)
EXPORT = re.compile(r"^export (?=(?:async function|function|const|let|class) )", re.MULTILINE)
UNREAD = re.compile(r"^\s*(?:import|export)\b.*|import\.meta|\bimport\(", re.MULTILINE)


class BundleError(ValueError):
    """A module the bundle cannot read (one line naming the file)."""


def variable(name: str) -> str:
    return "module_" + re.sub(r"\W", "_", name.removesuffix(".js"))


def module_code(name: str, text: str) -> str:
    """``const module_x = (() => { ...the module...; return { its exports }; })();``"""
    imports = [f"const {{ {names.strip().replace(' as ', ': ')} }} = {variable(dep)};"
               for names, dep in IMPORT.findall(text)]
    body = IMPORT.sub("", text)
    exported = EXPORTED.findall(body)
    body = EXPORT.sub("", body)
    unread = UNREAD.search(body)
    if unread is not None:
        raise BundleError(f"{name}: {unread.group(0).strip()[:60]!r} is not a form the bundle reads")
    return "\n".join([f"// {name}", f"const {variable(name)} = (() => {{", '"use strict";', *imports, body.rstrip(),
                      f"return {{ {', '.join(exported)} }};", "})();", ""])


def bundle(entry: str, files: Mapping[str, Path]) -> str:
    """``entry`` and every module it imports (``files``: module name -> file), each after those it imports; the
    entry's exports are ``module_<entry name>``'s."""
    order: list[tuple[str, str]] = []
    done: set[str] = set()

    def visit(name: str, chain: tuple[str, ...]) -> None:
        if name in chain:
            raise BundleError(f"{' -> '.join((*chain, name))}: modules that import each other")
        if name in done:
            return
        if name not in files:
            raise BundleError(f"{chain[-1] if chain else 'the page'} imports ./{name}, which is not one of the tab's files")
        text = files[name].read_text(encoding="utf-8")
        for _, dep in IMPORT.findall(text):
            visit(dep, (*chain, name))
        done.add(name)
        order.append((name, text))

    visit(entry, ())
    code = "\n".join(module_code(name, text) for name, text in order)
    if "</script" in code.lower():  # would end the inline element early
        raise BundleError("the tab's modules contain '</script', which cannot be written inline")
    return code
