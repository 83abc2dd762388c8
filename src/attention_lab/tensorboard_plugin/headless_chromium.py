"""Headless Chromium driven through the DevTools protocol over a pipe (``--remote-debugging-pipe``: no port, no
websocket, no extra package): the browser behind the page tests and ``scripts/screenshot_tab.py``, which draws the
attention tab for the docs."""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path

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
        user_data_dir.mkdir(parents=True, exist_ok=True)
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


def wait_for(browser: Chromium, expression: str, what: str, timeout: float) -> object:
    """Until ``expression`` is truthy in the page (polls the DOM); its value. TimeoutError naming ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not (value := browser.evaluate(expression)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {what} within {timeout:g} s")
        time.sleep(0.05)
    return value
