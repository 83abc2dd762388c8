"""The docs' tables of knobs, groups and variants are written by ``make docs`` (attention_lab.docs_tables) from the
schema, the config search path and the variants' classes: the docs hold what it writes, each table lists what it
must (read here independently of the generator), and rewriting touches nothing outside the marked tables."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from attention_lab.attention import ATTENTION_REGISTRY
from attention_lab.docs_tables import MARKED, PAGES, rewritten, tables
from conftest import CONFIG_DIR, ROOT, docs_table


@pytest.fixture(scope="module")
def generated() -> dict[str, str]:
    return tables(ROOT)


@pytest.mark.parametrize("page", PAGES)
def test_the_docs_hold_the_generated_tables(generated, page):
    text = (ROOT / page).read_text(encoding="utf-8")
    assert MARKED.search(text), f"{page} has no generated table"
    assert rewritten(text, generated) == text, f"{page}: a generated table is stale; run make docs"


def test_every_generated_table_is_on_a_page(generated):
    named = {m.group(2) for page in PAGES for m in MARKED.finditer((ROOT / page).read_text(encoding="utf-8"))}
    assert named == set(generated)


def test_rewriting_changes_only_the_marked_tables(generated):
    text = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    stale = text.replace("| `seed` | `0` |", "| `seed` | `7` |")
    assert stale != text and rewritten(stale, generated) == text
    outside = text.replace("## Groups (defaults in bold)", "## Groups of settings")  # outside every table: kept as it is
    assert rewritten(outside, generated) == outside


def test_a_marker_naming_no_table_is_an_error(generated):
    with pytest.raises(KeyError):
        rewritten("<!-- generated (make docs): nope -->\n| x |\n<!-- end generated -->\n", generated)


def variant_table(page: Path) -> list[str]:
    """The names in the first column of a page's table of variants (the one headed `| name |`)."""
    return [re.match(r"\| `(\w+)`", row)[1] for row in docs_table(page, "name")]


@pytest.mark.parametrize("page", [ROOT / "README.md", ROOT / "docs" / "library.md"], ids=lambda page: page.name)
def test_the_variant_table_lists_every_variant_once(page: Path):
    shipped = sorted(path.stem for path in (CONFIG_DIR / "model").glob("*.yaml"))
    assert sorted(variant_table(page)) == shipped


def test_a_variant_row_says_what_its_own_class_says(generated):
    """``cross`` subclasses ``self``: its row has its own origin and description, not its base's."""
    rows = {re.match(r"\| `(\w+)`", line).group(1): line for line in generated["variant_details"].splitlines()[2:]}
    for name in ("self", "cross"):
        cls = ATTENTION_REGISTRY[name]
        assert vars(cls)["origin"] in rows[name] and cls.__doc__.strip().split("\n")[0] in rows[name], name
    assert vars(ATTENTION_REGISTRY["self"])["origin"] not in rows["cross"]


def test_make_docs_rewrites_a_stale_page_and_says_which(tmp_path, capsys):
    from attention_lab.docs_tables import main

    for page in PAGES:
        (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / page).write_text((ROOT / page).read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "configs").symlink_to(CONFIG_DIR)
    (tmp_path / "docs" / "results").symlink_to(ROOT / "docs" / "results")  # the findings' recorded results
    page = tmp_path / "docs" / "configuration.md"
    current = page.read_text(encoding="utf-8")
    page.write_text(current.replace("| `seed` | `0` |", "| `seed` | `7` |"), encoding="utf-8")
    assert main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip() == "rewrote the generated tables of docs/configuration.md"
    assert page.read_text(encoding="utf-8") == current
    assert main([str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip().endswith("are current")


def accepts(variant: str, **settings) -> bool:
    """Whether build_attention builds ``variant`` with these settings (its one refusal: AttentionArgumentError)."""
    from attention_lab.attention import build_attention
    from attention_lab.attention.errors import AttentionArgumentError

    try:
        build_attention(variant, d_in=8, d_out=8, **settings)
    except AttentionArgumentError:
        return False
    return True


def test_the_capability_table_says_what_build_attention_accepts(generated):
    """Read independently of the facts it comes from: each ✓ or – is what building the module with that setting does."""
    for line in generated["variant_capabilities"].splitlines()[2:]:
        name, heads, kv_heads, window, dropout, rope, smeared, masks, _ = (c.strip(" `") for c in line.split("|")[1:-1])
        causal = {"causal only": True, "all": True, "padding, none": False}[masks]
        base = {"num_heads": 2 if heads == "✓" else 1, "causal": causal}
        assert accepts(name, **{**base, "num_heads": 2}) == (heads == "✓"), name
        if heads == "✓":  # with one head, kv_heads=1 is every head's own: nothing to share
            assert accepts(name, **base, kv_heads=1) == (kv_heads == "✓"), name
        assert accepts(name, **base, window=2) == (window == "✓"), name
        assert accepts(name, **base, dropout=0.1) == (dropout == "✓"), name
        assert accepts(name, **base, position="rope") == (rope == "✓"), name
        assert accepts(name, **base, position="alibi") == (rope == "✓"), name
        assert accepts(name, **base, smeared_keys=True) == (smeared == "✓"), name
        assert accepts(name, **{**base, "causal": not causal}) == (masks == "all"), name


def test_the_head_score_table_lists_every_kind_once():
    from attention_lab.analysis.head_scores import HEAD_SCORE_KINDS

    rows = docs_table(ROOT / "docs" / "tensorboard.md", "kind")
    assert [re.match(r"\| `(\w+)`", row)[1] for row in rows] == list(HEAD_SCORE_KINDS)
