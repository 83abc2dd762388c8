"""The attention tab's circuit views in a real browser (the harness of tests/browser/test_tensorboard_tab_browser.py): a
trained run (composition, copying and loss by index logged at every validation; its checkpoint for the word
tables, the attribution and the typed pair) beside a written run that holds patching recovery, path patching at its
last step (the path graph) and a config that clamps heads from step 50 (the slider's band). Every number drawn
is checked against what the routes answer, and so is every number of the views' SVG · PNG · CSV downloads.

Without Chromium the tests skip, except in CI (CI=true), where .ci/run installs it and they fail.
"""

from __future__ import annotations

import json
import re
import shutil
import urllib.error
import xml.etree.ElementTree as ET

import pytest
from chromium import SVG, allow_downloads, download, png_colours, read_csv, svg_cells, wait_for
from test_tab_paths_and_clamps import PATHS, write_config, write_end_values
from test_tensorboard_circuits import LOGGED
from test_tensorboard_tab_browser import (  # noqa: F401 (chromium: the browser fixture, shared)
    choose_run,
    chromium,
    no_dialogs_or_images,
    panel,
    type_sentence,
)

from tab_runs import write_run
from tb_server import serve

ROUTE = "/data/plugin/attention_lab"


@pytest.fixture(scope="module")
def tensorboard(chromium, request, tmp_path_factory):  # noqa: F811
    logdir = tmp_path_factory.mktemp("circuits_browser")
    shutil.copytree(request.getfixturevalue("tiny_trained_run"), logdir / "tiny")
    write_run(logdir / "written", steps=[50, 100], words=["Life", "is", "short"], scalars=LOGGED, name="")
    write_end_values(logdir / "written" / "tensorboard", PATHS, 100)
    write_config(logdir / "written", {"clamp": ["layer0/head*"], "clamp_from": 50, "clamp_until": None})
    with serve(logdir, logdir.parent / "server.log",
               lambda server: len(server.get_json(f"{ROUTE}/runs")["runs"]) == 2, "--load_fast=true") as server:
        yield server


@pytest.fixture(scope="module")
def downloads(chromium, tmp_path_factory):  # noqa: F811
    folder = tmp_path_factory.mktemp("circuit_downloads")
    allow_downloads(chromium, folder)
    return folder


def open_tab(browser, tensorboard) -> tuple[str, str]:
    """The trained run in the first panel, the written one beside it; both showing their circuits, their collapsed
    sections opened (the tables are one click away), the trained run's example pair in place."""
    browser.navigate(f"{tensorboard.base_url}/data/plugin_entry.html?name=attention_lab")
    wait_for(browser, "document.body.dataset.ready === 'true'", "tab ready")
    runs = [r["run"] for r in tensorboard.get_json(f"{ROUTE}/runs")["runs"]]
    trained, written = next(r for r in runs if r.startswith("tiny/")), next(r for r in runs if r.startswith("written/"))
    choose_run(browser, 1, written)
    choose_run(browser, 0, trained)
    try:
        wait_for(browser, f"{panel(0)}.dataset.run === {json.dumps(trained)} && {panel(0)}.dataset.state === 'maps'"
                          f" && {panel(1)}.dataset.state === 'maps'"
                          f" && {panel(0)}.querySelector('[data-view=composition]')"
                          f" && {panel(0)}.querySelector('.circuits-head').dataset.state === 'tables'"
                          f" && !!{panel(1)}.querySelector('[data-view=patching]')", "the circuits")
    except AssertionError as err:  # what the panels show instead
        shown = browser.evaluate("[...document.querySelectorAll('section.panel')].map(p => p.dataset.state + ': ' +"
                                 " (p.querySelector('.circuits-head') || p).innerText.slice(0, 400))")
        raise AssertionError(f"{err}; the panels show {shown}") from None
    browser.evaluate("document.querySelectorAll('details.section').forEach(d => { d.open = true; })")
    wait_for(browser, f"{panel(0)}.querySelector('.pair-form').dataset.state === 'ready'", "the example pair")
    return trained, written


def values(browser, index: int, selector: str) -> list:
    cells = browser.evaluate(f"[...{panel(index)}.querySelectorAll({json.dumps(selector)})].map(c => c.dataset.value)")
    return [None if value == "" else float(value) for value in cells]


def numbers(row: list[str]) -> list[float | None]:
    return [float(v) if v else None for v in row]


def svg_texts(data: bytes) -> list[str]:
    return [t.text for t in ET.fromstring(data).iter(f"{SVG}text")]


def shown_texts(browser, selector: str) -> list[str]:
    return browser.evaluate(f"[...{panel(0)}.querySelectorAll({json.dumps(selector)})].map(c => c.textContent)")


def name_part(text: str) -> str:
    """``text`` as a part of a download's name: letters, digits, '.', '_', '-' and '=' (export.js)."""
    return re.sub(r"[^A-Za-z0-9._=-]+", "-", text).strip("-")


def check_grid_downloads(browser, folder, table: str, rows: list[list[float | None]], name: str) -> None:
    """The SVG, PNG and CSV under ``table`` (a selector in the first panel): the CSV its layers x heads ``rows``, the
    SVG a cell and a text per value shown, the PNG drawn; the files' names end with ``name``."""
    links = f"{panel(0)}.querySelector({json.dumps(table)}).parentElement.querySelector('.export-links')"
    saved, csv_data = download(browser, folder, links, "csv")
    assert saved.endswith(f"_{name}.csv")
    got = read_csv(csv_data)
    assert got[0][1:5] == ["h0", "h1", "h2", "h3"] and [row[0] for row in got[1:]] == ["layer 0", "layer 1"]
    assert [numbers(row[1:]) for row in got[1:]] == [pytest.approx(row) for row in rows]
    _, svg = download(browser, folder, links, "svg")
    shown = shown_texts(browser, f"{table} td")
    assert len(svg_cells(svg)) == len(shown) == sum(len(row) for row in rows)
    colours = browser.evaluate(f"[...{panel(0)}.querySelectorAll({json.dumps(table + ' td')})]"
                               ".map(td => getComputedStyle(td).backgroundColor)")
    assert [cell.get("fill") for cell in svg_cells(svg)] == colours  # each cell in the tab's colour
    assert [t for t in svg_texts(svg) if t in shown] == shown  # each value as the tab writes it, in its order
    assert png_colours(download(browser, folder, links, "png")[1])[1][0] > 0


def test_logged_circuits_beside_the_maps(chromium, tensorboard):  # noqa: F811
    trained, _ = open_tab(chromium, tensorboard)
    step = chromium.evaluate(f"+{panel(0)}.dataset.step")
    data = tensorboard.get_json(f"{ROUTE}/circuits", run=trained, step=str(step))
    # one table per kind and pair of layers (2 layers: L0 -> L1), writer heads x reader heads, as the route says
    assert [g["kind"] for g in data["composition"]] == ["q", "k", "v"]
    shown = values(chromium, 0, "table[data-view=composition] td.score")
    assert shown == pytest.approx([v for g in data["composition"] for row in g["cells"] for v in row], abs=1e-9)
    assert len(shown) == 3 * 4 * 4 and all(0 <= v <= 1 for v in shown)
    assert values(chromium, 0, "table[data-view=copying] td.score") == pytest.approx(
        [v for row in data["copying"]["cells"] for v in row], abs=1e-9)
    heatmap = data["loss_by_index"]
    rects = chromium.evaluate(f"[...{panel(0)}.querySelectorAll('[data-view=loss-by-index] rect.cell')]"
                              ".map(r => [+r.dataset.step, +r.dataset.index, r.dataset.value === '' ? null : +r.dataset.value])")
    assert rects == [[s, i, pytest.approx(v) if v is not None else None] for s, row in zip(heatmap["steps"], heatmap["values"], strict=True)
                     for i, v in enumerate(row)]
    assert len(heatmap["steps"]) >= 2 and heatmap["indices"] >= 2
    assert chromium.evaluate(f"+{panel(0)}.querySelector('rect.current-step').dataset.step") == max(
        s for s in heatmap["steps"] if s <= step)
    # patching recovery of the written run, the whole layer in the last column
    assert values(chromium, 1, "table[data-view=patching] td.score") == pytest.approx([None, None, 0.7, 0.95])
    no_dialogs_or_images(chromium)


def test_the_slider_moves_the_circuits(chromium, tensorboard):  # noqa: F811
    _, written = open_tab(chromium, tensorboard)
    choose_run(chromium, 0, written)
    wait_for(chromium, f"{panel(0)}.dataset.run === {json.dumps(written)} && {panel(0)}.dataset.state === 'maps'"
                       f" && {panel(0)}.querySelector('.circuits').dataset.step === '100'", "the written run at 100")
    assert values(chromium, 0, "table[data-view=copying] td.score") == pytest.approx([None, 0.25, 0.9, None])
    x, y = chromium.center_of("input.step-slider")
    width = chromium.evaluate("document.querySelector('input.step-slider').getBoundingClientRect().width")
    chromium.click(x - width / 2 + 2, y)  # the first step: 50, whose validation is logged at 49
    wait_for(chromium, f"{panel(0)}.querySelector('.circuits').dataset.step === '50'"
                       f" && {panel(0)}.querySelectorAll('table[data-view=copying] td.score').length === 2", "step 50")
    assert values(chromium, 0, "table[data-view=copying] td.score") == pytest.approx([None, -0.5])
    assert not chromium.evaluate(f"{panel(0)}.querySelector('table[data-view=patching]')")  # logged at the end only
    # the step is said once, by the section, as the maps' step; the Scalars tab's step in the table's tooltip
    caption = chromium.evaluate(f"{panel(0)}.querySelector('table[data-view=copying] caption').textContent")
    assert caption == "Copying"
    assert chromium.evaluate(f"{panel(0)}.querySelector('details.circuits .section-step').textContent") == " · step 50"
    assert chromium.evaluate(f"{panel(0)}.querySelector('table[data-view=copying] caption').title").endswith(
        "(the validation after step 50, which Lightning logs at step 49)")


def test_word_tables_follow_the_enlarged_head(chromium, tensorboard, downloads):  # noqa: F811
    trained, _ = open_tab(chromium, tensorboard)
    chromium.click(*chromium.center_of("section.panel button.mini-map[data-layer='1'][data-head='2']"))
    wait_for(chromium, f"{panel(0)}.querySelector('.circuits-head').dataset.head === '1/2'", "the head's tables")
    data = tensorboard.get_json(f"{ROUTE}/head_circuit", run=trained, layer="1", head="2")
    for view in ("qk", "ov"):
        rows = chromium.evaluate(f"[...{panel(0)}.querySelectorAll('[data-view={view}-table] tr')].map(tr => "
                                 "[tr.querySelector('th').textContent, [...tr.querySelectorAll('td')].map(td => "
                                 "[td.dataset.word, +td.dataset.value])])")
        assert rows == [[row["word"], [[w, pytest.approx(v)] for w, v in row["top"]]] for row in data[view]]
    assert "layer 1, head 2" in chromium.evaluate(f"{panel(0)}.querySelector('.circuits-head').textContent")
    # each table downloads: the CSV a row per row of the table, its top words and their values side by side
    label = chromium.evaluate(f"{panel(0)}.querySelector('.run-name').textContent")
    for view, axes in (("qk", ("query word", "key word")), ("ov", ("attended word", "output word"))):
        links = f"{panel(0)}.querySelector('[data-view={view}-table] .export-links')"
        name, csv_data = download(chromium, downloads, links, "csv")
        assert name.endswith(f"_step-{data['step']}_layer1_head2_{view}-words.csv")
        rows = read_csv(csv_data)
        k = data["k"]
        assert rows[0] == [axes[0], *(f for i in range(1, k + 1) for f in (f"{axes[1]} {i}", f"value {i}"))]
        assert [row[0] for row in rows[1:]] == [row["word"] for row in data[view]]
        assert [row[1::2] for row in rows[1:]] == [[w for w, _ in row["top"]] for row in data[view]]
        assert [numbers(row[2::2]) for row in rows[1:]] == [pytest.approx([v for _, v in row["top"]])
                                                            for row in data[view]]
        _, svg = download(chromium, downloads, links, "svg")
        texts = svg_texts(svg)
        shown = shown_texts(chromium, f"[data-view={view}-table] td")
        assert len(svg_cells(svg)) == len(shown) and [t for t in texts if t in shown] == shown
        assert {cell.get("fill") for cell in svg_cells(svg)} == {"none"}  # no background in the tab either
        assert f"{label} · layer 1, head 2" in texts[0] and f"step {data['step']}" in texts[0]
    assert png_colours(download(chromium, downloads, links, "png")[1])[1][0] > 0
    no_dialogs_or_images(chromium)


def accepted(tensorboard, run: str, pair: dict) -> bool:
    """Whether the route patches ``pair`` (it refuses a pair whose two predictions are the same)."""
    try:
        tensorboard.get_json(f"{ROUTE}/patch_pair", run=run, **pair)
    except urllib.error.HTTPError as refused:
        assert refused.code == 400
        return False
    return True


def test_sentence_attribution_and_typed_pair_patching(chromium, tensorboard, downloads):  # noqa: F811
    trained, _ = open_tab(chromium, tensorboard)
    vocab = [row["word"] for row in tensorboard.get_json(f"{ROUTE}/head_circuit", run=trained, layer="0", head="0")["qk"]]
    words = [w for w in vocab if not w.startswith("<")]
    text = " ".join(words[:5])
    type_sentence(chromium, text)
    wait_for(chromium, f"!!{panel(0)}.querySelector('[data-view=attribution-grid]')", "the attribution")
    data = tensorboard.get_json(f"{ROUTE}/attribution", run=trained, text=text)
    last = len(data["words"]) - 1
    assert values(chromium, 0, "[data-view=attribution-grid] td.score") == pytest.approx(
        [layer[head][last] for layer in data["heads"] for head in range(len(layer))])
    assert f"logit {data['logit'][last]:.3f}" in chromium.evaluate(f"{panel(0)}.querySelector('.attribution-sum').textContent")
    # the grid of the position shown downloads, named with the position and its word; another position, its grid
    grid = "[data-view=attribution-grid]"
    for position in (last, 0):
        if position != last:
            chromium.evaluate(f"(() => {{ const s = {panel(0)}.querySelector('select.attribution-position');"
                              f" s.value = '{position}'; s.dispatchEvent(new Event('change')); }})()")
            wait_for(chromium, f"{panel(0)}.querySelector('select.attribution-position').value === '{position}'",
                     f"position {position}")
        rows = [[layer[head][position] for head in range(len(layer))] for layer in data["heads"]]
        assert values(chromium, 0, f"{grid} td.score") == pytest.approx([v for row in rows for v in row])
        check_grid_downloads(chromium, downloads, grid, rows,
                             f"sentence_attribution_position{position}_{name_part(data['words'][position])}")
    wait_for(chromium, f"{panel(1)}.querySelector('.circuits-sentence').textContent.includes('has no checkpoint')",
             "the written run's message")
    # a pair whose last prediction differs: the first word replaced until the route accepts it
    clean = words[:5]
    pair = next((pair for w in words[5:] if accepted(tensorboard, trained, pair := {
        "clean": " ".join(clean), "corrupted": " ".join([w, *clean[1:]])})), None)
    assert pair is not None
    chromium.evaluate("document.querySelector('section.panel form.pair-form').scrollIntoView({block: 'center'})")
    for field in ("clean", "corrupted"):
        chromium.evaluate(f"document.querySelector('section.panel input.pair-{field}').value = ''")  # the example's
        chromium.click(*chromium.center_of(f"section.panel input.pair-{field}"))
        chromium.send("Input.insertText", {"text": pair[field]})
    chromium.click(*chromium.center_of("section.panel button.pair-run"))
    wait_for(chromium, f"{panel(0)}.querySelector('.pair-box').dataset.state === 'patched'", "the patching heatmap")
    data = tensorboard.get_json(f"{ROUTE}/patch_pair", run=trained, **pair)
    assert values(chromium, 0, "[data-view=pair-patching] td.score") == pytest.approx(
        [v for row, whole in zip(data["cells"], data["whole_layer"], strict=True) for v in (*row, whole)])
    summary = chromium.evaluate(f"{panel(0)}.querySelector('.pair-summary').textContent")
    assert f"clean → “{data['clean_prediction']}”" in summary and f"corrupted → “{data['corrupted_prediction']}”" in summary
    check_grid_downloads(chromium, downloads, "[data-view=pair-patching]",
                         [[*row, whole] for row, whole in zip(data["cells"], data["whole_layer"], strict=True)],
                         "patching_" + name_part(f"{data['clean_prediction']} vs {data['corrupted_prediction']}"))
    no_dialogs_or_images(chromium)
    assert "Traceback" not in tensorboard.log_path.read_text()


def test_the_path_graph_at_the_last_step(chromium, tensorboard, downloads):  # noqa: F811
    _, written = open_tab(chromium, tensorboard)
    wait_for(chromium, f"!!{panel(1)}.querySelector('[data-view=paths] g.path-edge')", "the path graph")
    data = tensorboard.get_json(f"{ROUTE}/circuits", run=written, step=chromium.evaluate(f"{panel(1)}.dataset.step"))
    edges = chromium.evaluate(f"[...{panel(1)}.querySelectorAll('[data-view=paths] g.path-edge')].map(g => [g.dataset.sender,"
                              " g.dataset.receiver, g.dataset.kind, +g.dataset.value, +g.querySelector('path').getAttribute('stroke-width')])")
    key = "{0}/{1}".format
    assert [e[:4] for e in edges] == [[key(*e["sender"]), key(*e["receiver"]) if e["receiver"] else "logits",
                                       e["kind"] if e["receiver"] else "direct", pytest.approx(e["value"])]
                                      for e in data["paths"]["edges"]]
    labels = chromium.evaluate(f"[...{panel(1)}.querySelectorAll('[data-view=paths] text.path-label')].map(t => t.textContent)")
    assert labels[:3] == ["direct 0.80", "k 0.61", "v -0.33"] and len(labels) == len(edges)  # in the edges' order
    widths = [e[4] for e in edges]
    assert widths == sorted(widths, reverse=True) and widths[0] > 2 * widths[-1]  # as wide as |value|
    nodes = chromium.evaluate(f"[...{panel(1)}.querySelectorAll('[data-view=paths] g.path-node')].map(g => g.dataset.node)")
    assert sorted(nodes) == ["0/0", "0/1", "0/2", "1/0", "1/2", "logits"]  # the heads on a drawn path
    caption = chromium.evaluate(f"{panel(1)}.querySelector('[data-view=paths] figcaption').textContent")
    assert caption.startswith("Path patching: the 8 strongest of 12 paths (at most 8, |value| ≥ 0.05)")
    # its downloads: the CSV one row per path drawn, the SVG the drawing with every edge and label
    links = f"{panel(1)}.querySelector('[data-view=paths] .export-links')"
    name, csv_data = download(chromium, downloads, links, "csv")
    rows = read_csv(csv_data)
    assert name.endswith("_step-100_paths.csv") and rows[0] == ["sender", "receiver", "kind", "value"]
    assert [row[:3] for row in rows[1:3]] == [["layer1/head2", "logits", "direct"], ["layer0/head1", "layer1/head2", "k"]]
    assert numbers([row[3] for row in rows[1:]]) == pytest.approx([e[3] for e in edges])
    _, svg = download(chromium, downloads, links, "svg")
    drawn = ET.fromstring(svg)
    assert len([g for g in drawn.iter(f"{SVG}g") if g.get("class") == "path-edge"]) == len(edges)
    assert [t.text for t in drawn.iter(f"{SVG}text") if t.get("class") == "path-label"] == labels
    no_dialogs_or_images(chromium)


def test_clamped_steps_are_marked_on_the_slider(chromium, tensorboard):  # noqa: F811
    trained, written = open_tab(chromium, tensorboard)
    steps = sorted({*tensorboard.get_json(f"{ROUTE}/maps", run=trained)["steps"], 50, 100})
    label = chromium.evaluate(f"{panel(1)}.querySelector('.run-name').textContent")
    band = chromium.evaluate("(() => { const b = document.querySelector('.clamp-band'); const r = b.getBoundingClientRect();"
                             " return [b.dataset.first, b.dataset.last, r.left, r.right, r.height]; })()")
    assert band[:2] == ["50", str(steps[-1])] and band[4] > 0
    left, width = chromium.evaluate("(() => { const r = document.querySelector('input.step-slider')"
                                    ".getBoundingClientRect(); return [r.left, r.width]; })()")
    thumb = [left + 8 + (width - 16) * i / (len(steps) - 1) for i in range(len(steps))]  # each step's thumb centre
    first = steps.index(50)
    assert thumb[first - 1] < band[2] < thumb[first] and band[3] >= thumb[-1]  # from halfway before 50 to the end
    words = "document.querySelector('.clamp-words')"
    assert chromium.evaluate(f"{words}.textContent") == f"clamped: layer0/head* ({label})"  # at the last step
    _, y = chromium.center_of("input.step-slider")
    chromium.click(thumb[first - 1], y)  # the step before 50: nothing clamped
    wait_for(chromium, f"document.querySelector('.step-label').textContent === '{steps[first - 1]}'", "the step before")
    assert chromium.evaluate(f"{words}.hidden")
    chromium.click(thumb[first], y)
    wait_for(chromium, f"!{words}.hidden && {words}.textContent.startsWith('clamped: layer0/head*')", "step 50 clamped")
    no_dialogs_or_images(chromium)
