"""The interactive head view in a real browser: Debian's Chromium, headless, driven through the
DevTools protocol over a pipe (``--remote-debugging-pipe``: no port, no websocket, no extra package).

Without Chromium the tests skip, except in CI (CI=true), where .ci/run installs it and they fail.
"""

from __future__ import annotations

import base64
import fcntl
import io
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    explicit = os.environ.get("CHROMIUM")  # a path, or a name on PATH
    if explicit:
        return shutil.which(explicit)
    for name in CHROMIUM_NAMES:
        if path := shutil.which(name):
            return path
    return None


class Chromium:
    """Headless Chromium with the DevTools protocol on fds 3 (commands in) and 4 (replies out),
    one page attached in flat mode. ``send`` waits for its reply; events are queued."""

    def __init__(self, executable: str, user_data_dir: Path, *, width: int = 1100, height: int = 800) -> None:
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire_fds() -> None:  # in the child: its fd 3 reads our commands, its fd 4 writes replies
            high_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 100)  # out of the way of 3 and 4 first
            high_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 100)
            os.dup2(high_r, 3)
            os.dup2(high_w, 4)

        args = [executable, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-extensions", "--disable-dev-shm-usage",
                "--hide-scrollbars", "--force-device-scale-factor=1", f"--window-size={width},{height}",
                f"--user-data-dir={user_data_dir}", "--remote-debugging-pipe", "about:blank"]
        self.log = user_data_dir / "chromium.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         preexec_fn=wire_fds, pass_fds=(3, 4))
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict] = []
        self.session: str | None = None
        targets = self.send("Target.getTargets", session=False)["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.send("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True},
                                 session=False)["sessionId"]
        self.send("Page.enable")
        self.send("Runtime.enable")
        self.send("Emulation.setDeviceMetricsOverride",  # the viewport exactly, whatever the window frame takes
                  {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    def _read_message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._from_browser], [], [], left)[0]:
                raise TimeoutError("no reply from Chromium")
            chunk = os.read(self._from_browser, 1 << 16)
            if not chunk:
                raise RuntimeError(f"Chromium exited: {self.log.read_text(errors='replace')[-2000:]}")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: dict | None = None, *, session: bool = True, timeout: float = 30) -> dict:
        self._next_id += 1
        message = {"id": self._next_id, "method": method, "params": params or {}}
        if session and self.session:
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, method: str, timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            for i, event in enumerate(self.events):
                if event.get("method") == method:
                    return self.events.pop(i)
            self.events.append(self._read_message(deadline))

    def navigate(self, url: str) -> None:
        self.events.clear()
        self.send("Page.navigate", {"url": "about:blank"})  # a new document even when only the #hash differs
        self.wait_event("Page.loadEventFired")
        self.events.clear()
        self.send("Page.navigate", {"url": url})
        self.wait_event("Page.loadEventFired")

    def evaluate(self, expression: str):
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript error: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self) -> bytes:
        return base64.b64decode(self.send("Page.captureScreenshot", {"format": "png"})["data"])

    def mouse(self, kind: str, x: float, y: float, **extra) -> None:
        self.send("Input.dispatchMouseEvent", {"type": kind, "x": x, "y": y, **extra})

    def click(self, x: float, y: float) -> None:
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, button="left", clickCount=1)
        self.mouse("mouseReleased", x, y, button="left", clickCount=1)

    def center_of(self, selector: str) -> tuple[float, float]:
        box = self.evaluate(f"(() => {{ const r = document.querySelector({json.dumps(selector)})"
                            ".getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
        return box[0], box[1]

    def close(self) -> None:
        try:
            self.send("Browser.close", session=False, timeout=5)
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)


# ---------------------------------------------------------------------------------------------- tests

@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    executable = find_chromium()
    if executable is None:
        message = "Chromium not found (Debian: apt-get install chromium; .ci/run installs it)"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{message}: required in CI")
        pytest.skip(message)
    browser = Chromium(executable, tmp_path_factory.mktemp("chromium-profile"))
    yield browser
    browser.close()


@pytest.fixture(scope="module")
def page(chromium, request, tmp_path_factory):
    from attention_lab.review.html_view import write_html
    from attention_lab.review.maps import compute_maps, find_run, load_module

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
