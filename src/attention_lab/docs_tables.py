"""The docs' tables that list the lab's knobs, groups, variants, tasks and head-score kinds, written from where each
fact lives: the knobs from the schema (their ``knob(...)`` fields), the groups and their options from the config
search path (as ``--help`` lists them), the variants from their classes (``origin``, ``summary``, the docstring's
first paragraph and the facts the config checks read), the tasks from theirs (``summary``, ``lengths`` and their
``Options`` fields' meanings), the head-score kinds from their detectors, the package's layout from its modules'
docstrings, the findings of docs/experiments.md from their declared claims and recorded results
(:mod:`attention_lab.findings`). ``make docs`` (``python -m
attention_lab.docs_tables``, in the project's root) rewrites each table in place, between two marker lines::

    <!-- generated (make docs): variants -->
    | name | from | what it is |
    ...
    <!-- end generated -->

so a new variant or task (one file and one yaml) gets its rows by running it; tests/test_docs_tables.py checks that
the docs hold what this writes."""

from __future__ import annotations

import dataclasses
import re
import sys
from pathlib import Path
from typing import Any

from attention_lab.findings.race_table import race_table
from attention_lab.findings.tables import findings_table
from attention_lab.run.config_help import GROUPS, as_typed, knob_fields, search_path_options, user_groups

# The pages that hold generated tables, relative to the project's root.
PAGES = ("README.md", "docs/library.md", "docs/configuration.md", "docs/tensorboard.md", "docs/development.md",
         "docs/experiments.md")
MARKED = re.compile(r"^(<!-- generated \(make docs\): (\w+) -->\n)(.*?)^(<!-- end generated -->)$", re.MULTILINE | re.DOTALL)


def cell(text: str) -> str:
    """Text as one table cell: one line, its pipes escaped."""
    return " ".join(text.split()).replace("|", r"\|")


def first_paragraph(documented: Any) -> str:
    """A class's or a function's own docstring's first paragraph, as one line (none: the empty string)."""
    return cell((documented.__doc__ or "").strip().split("\n\n")[0])


def knob_table() -> str:
    """Every knob at its schema default, with its whole meaning (``help``, then ``more``)."""
    rows = ["| knob | default | values and meaning |", "|---|---|---|"]
    for knob in knob_fields():
        default = knob.default_factory() if knob.default is dataclasses.MISSING else knob.default
        meaning = knob.metadata["help"] + (f". {knob.metadata['more']}" if knob.metadata["more"] else "")
        rows.append(f"| `{knob.name}` | `{as_typed(default)}` | {cell(meaning)} |")
    return "\n".join(rows)


def variant_table(default: str | None, *, detailed: bool) -> str:
    """Every registered variant, by name: where it comes from and what it is (``detailed``: the docstring's first
    paragraph, docs/library.md; else its one-line ``summary``, README.md). The classes are imported (torch)."""
    from attention_lab.attention import ATTENTION_REGISTRY

    rows = ["| name | from | what it is |", "|---|---|---|"]
    for name in sorted(ATTENTION_REGISTRY):
        cls = ATTENTION_REGISTRY[name]
        own = vars(cls)  # a class's own entries: a subclass does not come from where its base came from
        label = f"`{name}` (default)" if name == default and not detailed else f"`{name}`"
        what = first_paragraph(cls) if detailed else cell(own.get("summary", ""))
        rows.append(f"| {label} | {cell(own.get('origin', ''))} | {what} |")
    return "\n".join(rows)


def capability_table() -> str:
    """What each variant takes, from the facts its class declares (the rules of
    :mod:`attention_lab.attention.arguments`, which the config checks apply): ✓ where it takes a setting."""
    from attention_lab.attention.arguments import accepted_positions, accepts_causal, accepts_smeared_keys
    from attention_lab.attention.declared import declared_variants

    def mark(holds: bool) -> str:
        return "✓" if holds else "–"

    rows = ["| name | `heads` > 1 | `kv_heads` | `window` | `dropout` | `position=rope`, `alibi` | `smeared_keys` | masks "
            "| its own options |", "|---|---|---|---|---|---|---|---|---|"]
    for name, facts in sorted(declared_variants().items()):
        masks = "causal only" if facts.causal_only else "padding, none" if not accepts_causal(facts) else "all"
        own = ", ".join(f"`{option}`" for option in facts.options) or "–"
        cells = [mark(facts.multi_head), mark(facts.grouped_kv), mark("window" not in facts.rejects),
                 mark("dropout" not in facts.rejects), mark("rope" in accepted_positions(facts)),
                 mark(accepts_smeared_keys(facts)), masks, own]
        rows.append(f"| `{name}` | {' | '.join(cells)} |")
    return "\n".join(rows)


def head_score_table() -> str:
    """Every head-score kind: what its detector measures (its docstring) and on what."""
    from attention_lab.analysis.head_scores import DETECTORS, PROBE_KINDS

    rows = ["| kind | what it measures (0..1) | on |", "|---|---|---|"]
    for kind, detector in DETECTORS.items():
        on = ("a fixed probe of random words repeated twice ([Olsson's instruments](#olssons-instruments))"
              if kind in PROBE_KINDS else "the first validation batch")
        rows.append(f"| `{kind}` | {first_paragraph(detector)} | {on} |")
    return "\n".join(rows)


def validation_metric_table() -> str:
    """Every scalar a validation logs, as its one declaration says (what ``optimized_metric`` may name besides the
    per-head values): its tag, which runs measure it, and what it is. The validation set's first."""
    from attention_lab.analysis.validation_metrics import SPLIT_RUNS, SPLITS, VALIDATION_METRICS

    rows = ["| metric | measured | what it is |", "|---|---|---|"]
    for split in SPLITS:
        for metric in (metric for metric in VALIDATION_METRICS if split in metric.splits):
            runs = [f"`task={metric.task}`"] * bool(metric.task)
            runs = "; ".join([SPLIT_RUNS[split], *runs] if split in SPLIT_RUNS else runs) or "every run"
            rows.append(f"| `{metric.tag(split)}` | {cell(runs)} | {cell(metric.meaning)} |")
    return "\n".join(rows)


def group_table(cfg: Any) -> str:
    """Every group a user chooses (``cfg``: the composed default config, with ``hydra``): its options, the default
    first and in bold, and what it decides (the words of ``--help``)."""
    rows = ["| group | options (the default in bold) | what it decides |", "|---|---|---|"]
    for group in user_groups(cfg):
        chosen = cfg.hydra.runtime.choices.get(group)
        options = search_path_options(cfg, group)
        listed = [f"**`{chosen}`**"] * (chosen in options) + [f"`{option}`" for option in options if option != chosen]
        what = cell(GROUPS.get(group, "")).replace("<", r"\<")  # "~callbacks.<name>": not an HTML tag
        rows.append(f"| `{group}` | {', '.join(listed)} | {what} |")
    return "\n".join(rows)


def task_table(default: str | None) -> str:
    """Every registered task: what it trains on (input → target) and its inputs' lengths."""
    from attention_lab.data.tasks import TASK_REGISTRY

    rows = ["| task | input → target | lengths |", "|---|---|---|"]
    for name in sorted(TASK_REGISTRY):
        own = vars(TASK_REGISTRY[name])
        label = f"`{name}` (default)" if name == default else f"`{name}`"
        rows.append(f"| {label} | {cell(own.get('summary', ''))} | {cell(own.get('lengths', ''))} |")
    return "\n".join(rows)


def task_option_table() -> str:
    """The tasks that have options of their own: each option at its default, and what it means."""
    from attention_lab.data.tasks import TASK_REGISTRY

    rows = ["| task | option (default) | meaning |", "|---|---|---|"]
    for name in sorted(TASK_REGISTRY):
        declared = dataclasses.fields(TASK_REGISTRY[name].Options)
        if not declared:
            continue
        options = ", ".join(f"`{f.name}` ({f.default})" for f in declared)
        meanings = [f.metadata.get("help", "") for f in declared]
        if len(declared) > 1:
            meanings = [f"`{f.name}`: {meaning}" for f, meaning in zip(declared, meanings, strict=True)]
        rows.append(f"| `{name}` | {options} | {cell('; '.join(meanings))} |")
    return "\n".join(rows)


def analysis_table() -> str:
    """The measurement library's public API: each module of ``attention_lab.analysis`` and what its ``__all__``
    names, with the first paragraph of each function's or class's docstring."""
    import importlib
    import pkgutil

    from attention_lab import analysis

    rows = ["| module | name | what it does |", "|---|---|---|"]
    for info in pkgutil.iter_modules(analysis.__path__):
        module = importlib.import_module(f"{analysis.__name__}.{info.name}")
        for name in getattr(module, "__all__", ()):
            documented = getattr(module, name)
            what = first_paragraph(documented) if callable(documented) else ""
            rows.append(f"| `{info.name}` | `{name}` | {what} |")
    return "\n".join(rows)


# A full stop that ends a sentence: not the one of "et al.", "ch. 3", "e.g." and the like.
LONG = 160  # characters
SENTENCE_END = re.compile(r"(?<!\bal)(?<!\bch)(?<!e\.g)(?<!i\.e)(?<!\bvs)(?<!\bcf)(?<!\beq)(?<!\bsec)\.(?:\s|$)")


def summary_line(source: Path) -> str:
    """The first sentence of a module's docstring (of its package's ``__init__.py`` for a folder), as one cell."""
    import ast

    doc = ast.get_docstring(ast.parse(source.read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(doc.split("\n\n")[0].split())
    end = SENTENCE_END.search(paragraph)
    sentence = paragraph[:end.start() + 1] if end else paragraph
    # A long sentence that opens with its subject and a colon ("Per-head measurements as pictures: after each
    # validation, ...") is named by that subject: the layout is read down a column.
    head, colon, _ = sentence.partition(": ")
    return cell(head if colon and len(sentence) > LONG and len(head) > 20 else sentence)


def layout_table(package: Path) -> str:
    """Every module of the package, the top level first, then each sub-package with its modules, each with the first
    sentence of its docstring: the layout of docs/development.md, which no one keeps by hand."""
    rows = ["| where | what it is |", "|---|---|"]
    name = f"src/{package.name}"
    rows += [f"| `{name}/{path.name}` | {summary_line(path)} |"
             for path in sorted(package.glob("*.py")) if path.name != "__init__.py"]
    for folder in sorted(p for p in package.iterdir() if (p / "__init__.py").is_file()):
        rows.append(f"| **`{name}/{folder.name}/`** | {summary_line(folder / '__init__.py')} |")
        for path in sorted(folder.rglob("*.py")):
            if path.name != "__init__.py" or path.parent != folder:
                shown = path.relative_to(folder).as_posix()
                rows.append(f"| `{shown}` | {summary_line(path)} |")
    return "\n".join(rows)


def tables(root: Path) -> dict[str, str]:
    """Every generated table of the project in ``root``, by the name its markers give."""
    from hydra import compose

    from attention_lab.run.overrides import hydra_compose_api

    with hydra_compose_api(root / "configs"):
        cfg = compose("train", return_hydra_config=True)
    model, task = (cfg.hydra.runtime.choices.get(group) for group in ("model", "task"))
    return {"knobs": knob_table(), "groups": group_table(cfg), "variants": variant_table(model, detailed=False),
            "variant_details": variant_table(model, detailed=True), "variant_capabilities": capability_table(),
            "tasks": task_table(task), "head_scores": head_score_table(),
            "task_options": task_option_table(), "layout": layout_table(Path(__file__).resolve().parent),
            "validation_metrics": validation_metric_table(),
            "analysis": analysis_table(), "findings": findings_table(root), "race": race_table(root)}


def rewritten(text: str, generated: dict[str, str]) -> str:
    """``text`` with each marked table replaced by the generated one of its name. Raises KeyError for a marker
    that names no table."""
    return MARKED.sub(lambda m: f"{m.group(1)}{generated[m.group(2)]}\n{m.group(4)}", text)


def main(argv: list[str]) -> int:
    """``python -m attention_lab.docs_tables [ROOT]``: rewrites the generated tables of the pages of the project in
    ROOT (default: the current directory) and names the pages it changed."""
    root = Path(argv[0]) if argv else Path.cwd()
    generated = tables(root)
    changed = []
    for page in PAGES:
        path = root / page
        text = path.read_text(encoding="utf-8")
        new = rewritten(text, generated)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(page)
    print(f"rewrote the generated tables of {', '.join(changed)}" if changed
          else f"the generated tables of {', '.join(PAGES)} are current")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
