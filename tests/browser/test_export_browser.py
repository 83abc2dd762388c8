"""Export and share, in a real browser (Debian's Chromium, headless, driven as tests/browser/test_html_browser.py drives it):
the attention tab's SVG · PNG · CSV links download what the maps and tables show, and the offline snapshot of
scripts/snapshot.py, opened from disk with the network off, shows every logged step and asks the network for
nothing.

Without Chromium the tests skip, except in CI (CI=true), where .ci/run installs it and they fail.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from chromium import (
    SVG,
    Chromium,
    allow_downloads,
    download,
    png_colours,
    read_csv,
    require_chromium,
    rgb,
    svg_cells,
    wait_for,
)

from tab_runs import XSS, write_run
from tb_server import serve

WORDS = ["Life", XSS, 'a,"b', "=cmd"]
STEPS = [0, 10, 20, 40]
SCALARS = {"head_score/previous_token/layer0/head0": [(9, 0.5), (19, 0.75)],
           "head_score/previous_token/layer1/head2": [(9, 0.125), (19, 0.875)],
           "ablation/zero/loss/layer0/head1": [(39, -0.25)], "ablation/zero/loss/layer0/all": [(39, 0.5)],
           "patching/logit_diff/layer1/head2": [(39, 0.5)], "val/loss_by_index/0": [(9, 2.0), (39, 0.5)],
           "val/loss_by_index/1": [(9, 3.0)], "val/loss_by_index/2": [(9, 2.5), (39, 1.25)]}
# the loss by index as written above: a row per logged step, a column per target index (None: not logged)
LOSS_BY_INDEX = {9: [2.0, 3.0, 2.5], 39: [0.5, None, 1.25]}
PANEL = "document.querySelector('section.panel')"
OPEN_SECTIONS = "document.querySelectorAll('details.section').forEach(d => { d.open = true; })"  # tables: one click


@pytest.fixture(scope="module")
def downloads(tmp_path_factory):
    return tmp_path_factory.mktemp("downloads")


@pytest.fixture(scope="module")
def chromium(tmp_path_factory, downloads):
    browser = Chromium(require_chromium(), tmp_path_factory.mktemp("chromium-profile"), width=1400, height=1000)
    allow_downloads(browser, downloads)
    yield browser
    browser.close()


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    path = tmp_path_factory.mktemp("export") / "runs" / "2026-11-26" / "10-00-00"
    return path, write_run(path, steps=STEPS, words=WORDS, scalars=SCALARS)


@pytest.fixture(scope="module")
def tensorboard(chromium, run_dir):
    logdir = run_dir[0].parents[2]
    with serve(logdir, logdir.parent / "server.log",
               lambda server: len(server.get_json("/data/plugin/attention_lab/runs")["runs"]) == 1,
               "--load_fast=true") as server:
        yield server


def no_page_errors(browser: Chromium) -> None:
    browser.evaluate("0")  # flush pending events
    errors = [e["params"] for e in browser.events if e.get("method") == "Runtime.exceptionThrown"]
    assert not errors, errors
    assert browser.evaluate("[...document.querySelectorAll('.export-links')].filter(b => b.dataset.error).length") == 0


def test_csv_and_file_names_keep_words_as_data(chromium, tensorboard):
    """The CSV builder quotes what needs quoting and keeps a spreadsheet from reading a word as a formula."""
    chromium.navigate(f"{tensorboard.base_url}/data/plugin_entry.html?name=attention_lab")
    words = ["a,b", 'say "hi"', "=1+1", "+1", "-x", "@x", "line\nbreak", XSS]
    reply = chromium.send("Runtime.evaluate", {"awaitPromise": True, "returnByValue": True, "expression":
        "import(new URL('/data/plugin/attention_lab/export.js', location.href)).then(m => ["
        f"m.csvText([{json.dumps(words)}, [-0.5, null, NaN, 0.25]]),"
        " m.fileName('heads=3 · runs/2026-11-26', 'step 20', 'head_score/previous_token')])"})
    text, name = reply["result"]["value"]
    assert read_csv(text.encode()) == [["a,b", 'say "hi"', "'=1+1", "'+1", "'-x", "'@x", "line\nbreak", XSS],
                                       ["-0.5", "", "", "0.25"]]
    assert text.endswith("\r\n") and name == "heads=3-runs-2026-11-26_step-20_head_score-previous_token"


def open_tab(browser: Chromium, tensorboard) -> tuple[str, dict]:
    """The tab's page (what TensorBoard puts in the tab's frame), loaded anew: Chrome lets a page start some ten
    downloads in a row and then asks the user whether to allow more (headless: refuses), so each test starts
    fewer. Its collapsed sections (scores, circuits) opened."""
    browser.navigate(f"{tensorboard.base_url}/data/plugin_entry.html?name=attention_lab")
    wait_for(browser, f"document.body.dataset.ready === 'true' && {PANEL}.dataset.state === 'maps'", "maps")
    browser.evaluate(OPEN_SECTIONS)
    run = tensorboard.get_json("/data/plugin/attention_lab/runs")["runs"][0]["run"]
    return run, tensorboard.get_json("/data/plugin/attention_lab/maps", run=run)


def test_every_map_downloads_as_svg_png_and_csv(chromium, tensorboard, downloads):
    run, data = open_tab(chromium, tensorboard)
    assert data["step"] == STEPS[-1]
    layer, head = (int(n) for n in chromium.evaluate(f"{PANEL}.querySelector('.detail-title').textContent")
                   .removeprefix("layer ").split(", head "))
    weights = data["weights"][layer][head]

    # the enlarged map: one rect per cell with its weight and colour, the words as text, the numbers in the CSV
    links = f"{PANEL}.querySelector('.enlarged .export-links')"
    name, svg = download(chromium, downloads, links, "svg")
    assert name == f"version_0-runs-2026-11-26-10-00-00_step-{STEPS[-1]}_layer{layer}_head{head}.svg"
    cells = svg_cells(svg)
    assert len(cells) == len(WORDS) ** 2
    assert [float(c.get("data-weight")) for c in cells] == pytest.approx([w for row in weights for w in row])
    texts = [t.text for t in ET.fromstring(svg).iter(f"{SVG}text")]
    assert texts.count(XSS) == 2 and f"step {STEPS[-1]} · layer {layer}, head {head}" in texts[0]
    _, csv_data = download(chromium, downloads, links, "csv")
    rows = read_csv(csv_data)
    assert rows[0] == ["query \\ key", "Life", XSS, 'a,"b', "'=cmd"]
    assert [row[0] for row in rows[1:]] == ["Life", XSS, 'a,"b', "'=cmd"]
    assert [[float(v) for v in row[1:]] for row in rows[1:]] == weights
    _, png = download(chromium, downloads, links, "png")
    colours, size = png_colours(png)
    root = ET.fromstring(svg)
    assert size == (2 * int(root.get("width")), 2 * int(root.get("height")))
    assert {rgb(c.get("fill")) for c in cells} <= colours  # every cell drawn in its colour

    # every layer and head
    links = f"{PANEL}.querySelector('.grid-box .export-links')"
    _, svg = download(chromium, downloads, links, "svg")
    flat = np.array(data["weights"]).ravel().tolist()
    assert [float(c.get("data-weight")) for c in svg_cells(svg)] == pytest.approx(flat)
    _, csv_data = download(chromium, downloads, links, "csv")
    rows = read_csv(csv_data)
    assert rows[0] == ["layer", "head", "query index", "query", "key index", "key", "weight"]
    assert [float(row[-1]) for row in rows[1:]] == flat and rows[1][:6] == ["0", "0", "0", "Life", "0", "Life"]
    _, png = download(chromium, downloads, links, "png")
    assert {rgb(c.get("fill")) for c in svg_cells(svg)} <= png_colours(png)[0]

    no_page_errors(chromium)


def test_the_head_view_downloads_as_drawn(chromium, tensorboard, downloads):
    """Its lines (one per query and key of each shown head) and their weights, as the head view draws them."""
    _, data = open_tab(chromium, tensorboard)
    chromium.click(*chromium.center_of("section.panel button.all-heads"))
    heads = len(data["weights"][0])
    wait_for(chromium, f"{PANEL}.querySelectorAll('line.attn').length === {heads * len(WORDS) ** 2}", "every head")
    layer = int(chromium.evaluate(f"{PANEL}.querySelector('select.layer-select').value"))
    links = f"{PANEL}.querySelector('.hv-export .export-links')"
    _, svg = download(chromium, downloads, links, "svg")
    lines = [line for line in ET.fromstring(svg).iter(f"{SVG}line") if line.get("class") == "attn"]
    drawn = {(int(line.get("data-head")), int(line.get("data-q")), int(line.get("data-k"))): float(line.get("data-weight"))
             for line in lines}
    expected = {(h, q, k): data["weights"][layer][h][q][k] for h in range(heads) for q in range(len(WORDS))
                for k in range(len(WORDS))}
    assert drawn == pytest.approx(expected) and len(lines) == len(expected)
    assert f"head view, layer {layer} of 2 · heads 0, 1, 2 of 3" in [t.text for t in ET.fromstring(svg).iter(f"{SVG}text")][0]
    _, csv_data = download(chromium, downloads, links, "csv")
    rows = read_csv(csv_data)
    assert rows[0] == ["head", "query index", "query", "key index", "key", "weight"]
    assert {(int(r[0]), int(r[1]), int(r[3])): float(r[5]) for r in rows[1:]} == pytest.approx(expected)
    assert {r[2] for r in rows[1:]} == {"Life", XSS, 'a,"b', "'=cmd"}
    assert png_colours(download(chromium, downloads, links, "png")[1])[1][0] > 0
    no_page_errors(chromium)


def test_every_score_table_downloads_as_svg_png_and_csv(chromium, tensorboard, downloads):
    run, data = open_tab(chromium, tensorboard)
    grids = tensorboard.get_json("/data/plugin/attention_lab/scores", run=run, step=str(data["step"]))["grids"]
    families = chromium.evaluate(f"[...{PANEL}.querySelectorAll('table.score-grid')].map(t => t.dataset.family)")
    assert families == ["head_score/previous_token", "ablation/zero/loss"]
    shown = sorted((g for g in grids if g["family"] in families), key=lambda g: families.index(g["family"]))
    for index, grid in enumerate(shown):
        links = f"{PANEL}.querySelectorAll('table.score-grid')[{index}].parentElement.querySelector('.export-links')"
        _, csv_data = download(chromium, downloads, links, "csv")
        rows = read_csv(csv_data)
        whole = any(v is not None for v in grid["whole_layer"])
        expected = [[*row, *([grid["whole_layer"][layer]] if whole else [])] for layer, row in enumerate(grid["cells"])]
        assert [[float(v) if v else None for v in row[1:]] for row in rows[1:]] == expected
        _, svg = download(chromium, downloads, links, "svg")
        shown = chromium.evaluate(f"{PANEL}.querySelectorAll('table.score-grid')[{index}].querySelectorAll('td').length")
        assert len(svg_cells(svg)) == shown == sum(len(row) for row in expected)
        assert png_colours(download(chromium, downloads, links, "png")[1])[1][0] > 0
    no_page_errors(chromium)


def loss_by_index_csv(data: bytes) -> dict[int, list[float | None]]:
    rows = read_csv(data)
    assert rows[0] == ["step \\ target index", "0", "1", "2"]
    return {int(row[0]): [float(v) if v else None for v in row[1:]] for row in rows[1:]}


def test_the_loss_by_index_downloads_as_svg_png_and_csv(chromium, tensorboard, downloads):
    """Steps down, target indices across, a missing value empty; the SVG the drawing with its scale and outline."""
    open_tab(chromium, tensorboard)
    figure = f"{PANEL}.querySelector('[data-view=loss-by-index]')"
    links = f"{figure}.querySelector('.export-links')"
    wait_for(chromium, f"!!{figure} && !!{links}", "the loss by index with its links")
    name, csv_data = download(chromium, downloads, links, "csv")
    assert name == f"version_0-runs-2026-11-26-10-00-00_step-{STEPS[-1]}_loss-by-index.csv"
    assert loss_by_index_csv(csv_data) == LOSS_BY_INDEX
    _, svg = download(chromium, downloads, links, "svg")
    root = ET.fromstring(svg)
    cells = svg_cells(svg)
    assert {(int(c.get("data-step")), int(c.get("data-index"))): float(c.get("data-value")) if c.get("data-value")
            else None for c in cells} == {(step, i): v for step, row in LOSS_BY_INDEX.items() for i, v in enumerate(row)}
    drawn = chromium.evaluate(f"[...{figure}.querySelectorAll('rect.cell')].map(r => r.getAttribute('fill'))")
    assert [c.get("fill") for c in cells] == drawn  # the colours of the tab
    outline = [r for r in root.iter(f"{SVG}rect") if r.get("class") == "current-step"]
    assert [r.get("data-step") for r in outline] == ["39"]  # the maps of step 40 show the validation logged at 39
    style = "".join(node.text for node in root.iter(f"{SVG}style"))
    assert ".current-step" in style and ".axis" in style  # standalone: the rules it takes from style.css
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "loss by target index" in texts[0] and "loss" in texts and "0.50" in texts and "3.00" in texts  # its scale
    png = download(chromium, downloads, links, "png")[1]
    assert {rgb(c.get("fill")) for c in cells if c.get("data-value")} <= png_colours(png)[0]
    no_page_errors(chromium)


def test_the_offline_snapshot_shows_every_logged_step_without_the_network(chromium, run_dir, downloads, tmp_path):
    from attention_lab.tensorboard_plugin.snapshot import snapshot

    path, written = run_dir
    page = snapshot(path, out=str(tmp_path / "snapshot.html"))["path"]
    chromium.send("Network.enable")
    chromium.send("Network.emulateNetworkConditions", {"offline": True, "latency": 0, "downloadThroughput": -1,
                                                       "uploadThroughput": -1})
    try:
        chromium.navigate(page.as_uri())
        wait_for(chromium, f"document.body.dataset.ready === 'true' && {PANEL}.dataset.state === 'maps'", "snapshot")
        chromium.evaluate(OPEN_SECTIONS)
        assert chromium.evaluate("document.querySelector('input.step-slider').max") == str(len(STEPS) - 1)
        shown_before = None
        for index, step in enumerate(STEPS):
            chromium.evaluate(f"(() => {{ const s = document.querySelector('input.step-slider'); s.value = '{index}';"
                              " s.dispatchEvent(new Event('input')); })()")
            wait_for(chromium, f"{PANEL}.dataset.step === '{step}' && {PANEL}.dataset.state === 'maps'", f"step {step}")
            minis = chromium.evaluate(f"[...{PANEL}.querySelectorAll('svg.heatmap.mini')].map(s => "
                                      "[...s.querySelectorAll('rect.cell')].map(r => +r.dataset.weight))")
            expected = written[step].astype(np.float16).astype(np.float64).round(4)
            assert np.array(minis) == pytest.approx(expected.reshape(len(minis), -1), abs=1e-9)
            shown = chromium.evaluate(f"[...{PANEL}.querySelectorAll('svg.heatmap.large rect.cell')]"
                                      ".map(r => +r.dataset.weight)")
            assert shown != shown_before  # the enlarged map changed with the step
            shown_before = shown
            captions = chromium.evaluate(f"[...{PANEL}.querySelectorAll('table.score-grid caption')]"
                                         ".map(c => c.textContent)")
            assert len(captions) == {0: 0, 10: 1, 20: 1, 40: 2}[step], captions
            # the circuits logged at or before the step, and the loss by index of every step, from the page too
            wait_for(chromium, f"{PANEL}.querySelector('.circuits').dataset.step === '{step}'", f"circuits at {step}")
            assert chromium.evaluate(f"!!{PANEL}.querySelector('table.circuit-grid[data-view=patching]')") == (step == 40)
            assert chromium.evaluate(f"!!{PANEL}.querySelector('[data-view=loss-by-index]')") is True
        # the snapshot exports too, offline: the CSV of the last step's enlarged map
        _, csv_data = download(chromium, downloads, f"{PANEL}.querySelector('.enlarged .export-links')", "csv")
        assert [float(v) for row in read_csv(csv_data)[1:] for v in row[1:]] == pytest.approx(shown_before)
        _, png = download(chromium, downloads, f"{PANEL}.querySelector('.enlarged .export-links')", "png")
        assert png.startswith(b"\x89PNG\r\n\x1a\n")  # a page from disk may draw its SVG on a canvas, too
        # the circuits' tables too: the patching recovery logged at step 39, shown with the maps of step 40
        patching = f"{PANEL}.querySelector('table.circuit-grid[data-view=patching]').parentElement"
        wait_for(chromium, f"!!{patching}.querySelector('.export-links')", "the patching table's links")
        _, csv_data = download(chromium, downloads, f"{patching}.querySelector('.export-links')", "csv")
        assert read_csv(csv_data) == [["", "h0", "h1", "h2", "all"], ["layer 0", "", "", "", ""],
                                      ["layer 1", "", "", "0.5", ""]]
        # and the loss by index of every step
        loss = f"{PANEL}.querySelector('[data-view=loss-by-index] .export-links')"
        assert loss_by_index_csv(download(chromium, downloads, loss, "csv")[1]) == LOSS_BY_INDEX
        assert svg_cells(download(chromium, downloads, loss, "svg")[1])
        requests = [e["params"]["request"]["url"] for e in chromium.events
                    if e.get("method") == "Network.requestWillBeSent"]
        assert requests and all(url.startswith(("file:", "data:", "blob:", "about:")) for url in requests), requests
        assert chromium.evaluate("document.querySelector('.sentence-form').hidden") is True
        no_page_errors(chromium)
    finally:
        chromium.send("Network.emulateNetworkConditions", {"offline": False, "latency": 0, "downloadThroughput": -1,
                                                           "uploadThroughput": -1})
