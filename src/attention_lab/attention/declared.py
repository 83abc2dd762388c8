"""What each attention variant declares about itself, read from its class's source without importing torch.

A variant says what it can do once, as class attributes (``takes_source = False``, ``multi_head = True``, ...;
see :class:`~attention_lab.attention.base.AttentionModule`). The config checks run before torch is imported,
so that a bad setting fails in well under a second; importing the variants would cost torch's start-up
(docs/benchmarks.md, "Start-up"). They read the same attributes from the package's source instead: each class
decorated with ``@register("name")``, its literal class attributes, and those of its bases in this package.
``tests/attention/test_variant_facts.py`` checks the result against the imported classes.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from attention_lab.lazy_registry import declaration_pattern

PACKAGE_DIR = Path(__file__).resolve().parent
# Where a class and a registration are, found before any parsing: only the classes a check needs are parsed.
CLASS_LINE = re.compile(r"^class (\w+)\b", re.MULTILINE)
REGISTERED = declaration_pattern("register")


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
    causal_only: bool = False  # a recurrence over time: causal=True (mask=causal) only


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


def top_level_block(text: str, start: int) -> str:
    """The top-level statement that begins at ``start`` (decorators, then a class): up to the next line that is
    neither indented, blank, a comment nor the class's own header."""
    lines = text[start:].splitlines(keepends=True)
    header = next(i for i, line in enumerate(lines) if line.startswith("class "))
    end = header + 1
    while end < len(lines) and (not lines[end].strip() or lines[end][0] in " \t#)"):
        end += 1
    return "".join(lines[:end])


@functools.lru_cache(maxsize=256)
def read_class(text: str, path: Path, class_name: str) -> ast.ClassDef:
    """One class of a module, parsing only its own lines (the whole module if they do not parse alone). Memoized
    by the source text itself: the config checks ask for the same few classes many times per start, and an edited
    file is new text. The node is only read, never changed."""
    match = re.search(rf"^(?:@.*\n)*class {class_name}\b", text, re.MULTILINE)
    if match is not None:
        try:
            node = ast.parse(top_level_block(text, match.start())).body[0]
            if isinstance(node, ast.ClassDef) and node.name == class_name:
                return node
        except SyntaxError:
            pass
    return next(n for n in ast.parse(text, str(path)).body if isinstance(n, ast.ClassDef) and n.name == class_name)


@functools.lru_cache(maxsize=256)
def declarations(text: str) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """A module's classes and its registrations ((name, class name)), by its source text (memoized as read_class)."""
    return tuple(CLASS_LINE.findall(text)), tuple(REGISTERED.findall(text))


def declared_variants(package_dir: Path = PACKAGE_DIR, only: str | None = None) -> dict[str, VariantFacts]:
    """Every registered variant of the package in ``package_dir``, by name; ``only``: just that one (if it exists).
    Only the registered classes and their bases are parsed: the config checks run on every start."""
    texts = {path: path.read_text(encoding="utf-8") for path in sorted(package_dir.glob("*.py"))}
    where = {name: path for path, text in texts.items() for name in declarations(text)[0]}
    registered = [(name, class_name) for text in texts.values() for name, class_name in declarations(text)[1]
                  if only is None or name == only]
    if only is not None and not registered:  # registered in some other spelling: read every class
        registered = [(only, class_name) for class_name in where]

    nodes: dict[str, ast.ClassDef] = {}  # each class parsed once per call
    read: dict[str, dict[str, Any]] = {}  # class name -> its facts

    def node_of(class_name: str) -> ast.ClassDef:
        if class_name not in nodes:
            nodes[class_name] = read_class(texts[where[class_name]], where[class_name], class_name)
        return nodes[class_name]

    def inherited(class_name: str) -> dict[str, Any]:
        """Its base's facts (the first base defined in the package), overridden by its own."""
        if class_name not in read:
            node = node_of(class_name)
            base = next((b.id for b in node.bases if isinstance(b, ast.Name) and b.id in where), None)
            read[class_name] = {**(inherited(base) if base else {}), **class_attributes(node, where[class_name])}
        return read[class_name]

    variants: dict[str, VariantFacts] = {}
    for name, class_name in registered:
        if registered_name(node_of(class_name)) != name:
            continue
        values = inherited(class_name)
        missing = [fact for fact in ("takes_source", "multi_head", "grouped_kv", "projects") if fact not in values]
        if missing:
            raise UnreadableDeclaration(f"attention variant '{name}' ({class_name} in {where[class_name].name}) must "
                                        f"declare {', '.join(missing)} in its class body or a base class in the package")
        variants[name] = VariantFacts(name, **values)
    return variants


class NamesWhere:
    """The variants that declare ``fact`` true (or for which a rule, ``fact(variant)``, holds), read when an error
    message lists them (reading every variant's source costs more than the checks themselves, and importing every
    variant to ask its class far more)."""

    def __init__(self, fact: str | Callable[[VariantFacts], bool]) -> None:
        self.holds = fact if callable(fact) else lambda variant: getattr(variant, fact)

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(name for name, variant in declared_variants().items() if self.holds(variant)))
