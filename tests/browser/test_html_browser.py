"""The interactive head view in a real browser: Debian's Chromium, headless, driven through the
DevTools protocol over a pipe (``--remote-debugging-pipe``: no port, no websocket, no extra package).

Without Chromium the tests skip, except in CI (CI=true), where .ci/run installs it and they fail.
"""

from __future__ import annotations

import io

import pytest
from chromium import Chromium, require_chromium


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    browser = Chromium(require_chromium(), tmp_path_factory.mktemp("chromium-profile"))
    yield browser
    browser.close()


@pytest.fixture(scope="module")
def page(chromium, request, tmp_path_factory):
    from attention_lab.records.trained_run import find_run, load_module
    from attention_lab.review.html_view import write_html
    from attention_lab.review.maps import compute_maps

    # Asked for here, after `chromium`: without a browser the (session-scoped) training is not run at all.
    tiny_trained_run = request.getfixturevalue("tiny_trained_run")
    module, _ = load_module(find_run(tiny_trained_run))
    maps = compute_maps(module, "Your journey starts with one step")
    return write_html(maps, tmp_path_factory.mktemp("html") / "head_view.html"), maps


def drawn_lines(browser: Chromium) -> list[dict]:
    return browser.evaluate("""[...document.querySelectorAll('line.attn')].map(l => ({
        head: +l.dataset.head, q: +l.dataset.q, k: +l.dataset.k,
        opacity: +l.getAttribute('stroke-opacity'), visible: getComputedStyle(l).display !== 'none'}))""")


def assert_lines_show(lines: list[dict], weights, head: int) -> None:
    """Every (query, key) pair of the head is drawn, with the attention weight as opacity."""
    assert {line["head"] for line in lines} == {head}
    assert len(lines) == weights.shape[-2] * weights.shape[-1]
    for line in lines:
        assert line["opacity"] == pytest.approx(float(weights[head][line["q"]][line["k"]]), abs=1e-3)


def assert_no_page_errors(browser: Chromium) -> None:
    browser.evaluate("0")  # flush pending events
    errors = [e["params"] for e in browser.events if e.get("method") == "Runtime.exceptionThrown" or (
        e.get("method") == "Runtime.consoleAPICalled" and e["params"].get("type") == "error")]
    assert not errors, errors


def region(png: bytes, box: list[float]):
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        return image.convert("RGB").crop(tuple(round(v) for v in box))


def test_head_view_renders_words_and_reacts_to_choices(chromium, page):
    from PIL import ImageChops

    path, maps = page
    chromium.send("Network.enable")
    chromium.navigate(path.as_uri())
    requests = [e["params"]["request"]["url"] for e in chromium.events if e.get("method") == "Network.requestWillBeSent"]
    assert all(url.startswith(("file:", "data:", "about:")) for url in requests), requests  # no network needed
    assert chromium.evaluate("document.body.dataset.ready") == "true"

    # The words are rendered, visibly, in both columns.
    tokens = chromium.evaluate("""[...document.querySelectorAll('text.token')].map(t => {
        const r = t.getBoundingClientRect();
        return {side: t.classList.contains('left') ? 'left' : 'right', text: t.textContent,
                w: r.width, h: r.height, x: r.x, y: r.y}; })""")
    assert [t["text"] for t in tokens if t["side"] == "left"] == maps.query_words
    assert [t["text"] for t in tokens if t["side"] == "right"] == maps.words
    viewport = chromium.evaluate("[innerWidth, innerHeight]")
    for token in tokens:
        assert token["w"] > 5 and token["h"] > 5
        assert 0 <= token["x"] and token["x"] + token["w"] <= viewport[0] and token["y"] + token["h"] <= viewport[1]
    assert "layer 0 of 2 · head 0 of 4" in chromium.evaluate("document.getElementById('status').textContent")
    assert_lines_show(drawn_lines(chromium), maps.weights[0], head=0)
    svg_box = chromium.evaluate("(() => { const r = document.getElementById('view').getBoundingClientRect();"
                                " return [r.left, r.top, r.right, r.bottom]; })()")
    before = chromium.screenshot()

    # A real mouse click on head 2's button redraws the lines with head 2's weights.
    chromium.click(*chromium.center_of('button.head[data-head="2"]'))
    assert chromium.evaluate("location.hash") == "#layer=0&head=2"
    assert "head 2 of 4" in chromium.evaluate("document.getElementById('status').textContent")
    assert_lines_show(drawn_lines(chromium), maps.weights[0], head=2)
    after = chromium.screenshot()
    diff = ImageChops.difference(region(before, svg_box), region(after, svg_box))
    changed = sum(1 for pixel in diff.getdata() if max(pixel) > 30)
    assert changed > 500, f"only {changed} pixels of the drawing changed"

    # Another layer from the drop-down.
    chromium.evaluate("(() => { const s = document.getElementById('layer'); s.value = '1';"
                      " s.dispatchEvent(new Event('change')); })()")
    assert_lines_show(drawn_lines(chromium), maps.weights[1], head=2)

    # Hovering a query word keeps only its lines and writes its weights beside the keys.
    chromium.mouse("mouseMoved", *chromium.center_of('text.token.left[data-index="1"]'))
    lines = drawn_lines(chromium)
    assert {(line["q"], line["visible"]) for line in lines} == {(1, True)} | {
        (q, False) for q in range(len(maps.query_words)) if q != 1}
    labels = chromium.evaluate("[...document.querySelectorAll('.weight-label')].map(t => t.textContent)")
    assert labels == [f"{w:.2f}" for w in maps.weights[1][2][1]]
    chromium.mouse("mouseMoved", 2, 2)
    assert chromium.evaluate("document.querySelectorAll('.weight-label').length") == 0

    # Shift+click overlays a second head.
    x, y = chromium.center_of('button.head[data-head="0"]')
    chromium.mouse("mousePressed", x, y, button="left", clickCount=1, modifiers=8)
    chromium.mouse("mouseReleased", x, y, button="left", clickCount=1, modifiers=8)
    assert {line["head"] for line in drawn_lines(chromium)} == {0, 2}
    assert chromium.evaluate("location.hash") == "#layer=1&head=0,2"
    assert_no_page_errors(chromium)


def test_address_chooses_layer_and_head(chromium, page):
    path, maps = page
    chromium.navigate(path.as_uri() + "#layer=1&head=3")
    assert "layer 1 of 2 · head 3 of 4" in chromium.evaluate("document.getElementById('status').textContent")
    assert_lines_show(drawn_lines(chromium), maps.weights[1], head=3)
    assert chromium.evaluate("document.getElementById('layer').value") == "1"
    assert_no_page_errors(chromium)


def test_the_page_opens_on_the_runs_best_head_and_the_address_still_wins(chromium, page, tmp_path):
    """visualize.py writes the page with the head scoring highest on the run's task kind (as the attention tab
    opens); the page opens on it, and an address that names a view keeps that view."""
    from attention_lab.review.html_view import write_html

    _, maps = page
    path = write_html(maps, tmp_path / "opening.html", {"kind": "reverse", "layer": 1, "head": 3, "score": 0.97})
    chromium.navigate(path.as_uri())
    assert "layer 1 of 2 · head 3 of 4" in chromium.evaluate("document.getElementById('status').textContent")
    assert_lines_show(drawn_lines(chromium), maps.weights[1], head=3)
    assert chromium.evaluate("document.querySelector('.opening').textContent") == (
        "Opens on layer 1, head 3: the head scoring highest on reverse (0.97) in the run's final validation.")
    chromium.navigate(path.as_uri() + "#layer=0&head=1")
    assert "layer 0 of 2 · head 1 of 4" in chromium.evaluate("document.getElementById('status').textContent")
    assert_no_page_errors(chromium)
