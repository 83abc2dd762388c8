"""What each attention variant declares about itself, read from its class's source without importing torch.

A variant says what it can do once, as class attributes (``takes_source = False``, ``multi_head = True``, ...;
see :class:`~attention_lab.attention.base.AttentionModule`). The config checks run before torch is imported,
so that a bad setting fails in well under a second; importing the variants would cost torch's start-up (about
3.5 s on a loaded 2-core machine). They read the same attributes from the package's source instead: each class
decorated with ``@register("name")``, its literal class attributes, and those of its bases in this package.
``tests/test_variant_facts.py`` checks the result against the imported classes.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

PACKAGE_DIR = Path(__file__).resolve().parent
CLASS_LINE = re.compile(r"^class (\w+)\b", re.MULTILINE)  # which file defines a class, before any parsing


@dataclass(frozen=True)
class VariantFacts:
    """A variant's declarations (the class attributes of the same names)."""

    name: str
    takes_source: bool  # encoder-decoder: keys and values come from a second sequence
    multi_head: bool  # accepts num_heads > 1
    grouped_kv: bool  # accepts kv_heads < num_heads
    projects: bool  # has query/key projections for rope and alibi to act on
    learned_heads: bool = True  # its heads have weights of their own (something to ablate)
    options: tuple[str, ...] = ()  # its own build_attention keywords
    choices: dict[str, tuple[Any, ...]] = field(default_factory=dict)  # an option's allowed values
    rejects: dict[str, str] = field(default_factory=dict)  # shared arguments it refuses -> why
    kind: str = "softmax"
    positions_note: str = "it has no query/key projections"


FACT_NAMES = tuple(f.name for f in fields(VariantFacts) if f.name != "name")


def facts_of(name: str, cls: type) -> VariantFacts:
    """The facts of an imported class (what the source reader must agree with)."""
    return VariantFacts(name, **{fact: getattr(cls, fact) for fact in FACT_NAMES})


class UnreadableDeclaration(TypeError):
    """A variant's fact is not a literal in its class body, so it cannot be read without importing torch."""


def registered_name(node: ast.ClassDef) -> str | None:
    """``"self"`` for a class decorated with ``@register("self")``."""
    for decorator in node.decorator_list:
        if (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Name) and decorator.func.id == "register"
                and decorator.args and isinstance(decorator.args[0], ast.Constant)):
            return str(decorator.args[0].value)
    return None


def class_attributes(node: ast.ClassDef, path: Path) -> dict[str, Any]:
    """The class body's assignments to fact names, as values; a fact assigned anything but a literal is an error."""
    found: dict[str, Any] = {}
    for statement in node.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target, value = statement.target, statement.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id in FACT_NAMES:
            try:
                found[target.id] = ast.literal_eval(value)
            except ValueError as err:
                raise UnreadableDeclaration(f"{node.name}.{target.id} in {path.name} must be a literal (the config "
                                            "checks read it without importing the class)") from err
    return found


def declared_variants(package_dir: Path = PACKAGE_DIR, only: str | None = None) -> dict[str, VariantFacts]:
    """Every registered variant of the package in ``package_dir``, by name; ``only``: just that one (if it exists),
    reading only its file and its bases' (a config check needs one variant, and parsing is most of the cost)."""
    texts = {path: path.read_text(encoding="utf-8") for path in sorted(package_dir.glob("*.py"))}
    where = {name: path for path, text in texts.items() for name in CLASS_LINE.findall(text)}
    marker = f'@register("{only}")' if only is not None else "@register("
    wanted = [path for path, text in texts.items() if marker in text] or [p for p, t in texts.items() if "@register(" in t]
    parsed: dict[Path, dict[str, ast.ClassDef]] = {}

    def classes_in(path: Path) -> dict[str, ast.ClassDef]:
        if path not in parsed:
            tree = ast.parse(texts[path], str(path))
            parsed[path] = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
        return parsed[path]

    def inherited(node: ast.ClassDef, path: Path) -> dict[str, Any]:
        """Its base's facts (the first base defined in the package), overridden by its own."""
        base = next((b.id for b in node.bases if isinstance(b, ast.Name) and b.id in where), None)
        values = inherited(classes_in(where[base])[base], where[base]) if base else {}
        return {**values, **class_attributes(node, path)}

    variants: dict[str, VariantFacts] = {}
    for path in wanted:
        for class_name, node in classes_in(path).items():
            name = registered_name(node)
            if name is None or (only is not None and name != only):
                continue
            values = inherited(node, path)
            missing = [fact for fact in ("takes_source", "multi_head", "grouped_kv", "projects") if fact not in values]
            if missing:
                raise UnreadableDeclaration(f"attention variant '{name}' ({class_name} in {path.name}) must declare "
                                            f"{', '.join(missing)} in its class body or a base class in the package")
            variants[name] = VariantFacts(name, **values)
    return variants
