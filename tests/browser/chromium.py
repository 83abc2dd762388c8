"""The page tests' browser (headless Chromium over the DevTools protocol: attention_lab.tensorboard_plugin.headless_chromium), and the
downloads of the pages' export links, clicked as a user clicks them and read back."""

from __future__ import annotations

import csv
import io
import os
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from attention_lab.tensorboard_plugin.headless_chromium import Chromium, find_chromium

__all__ = ["Chromium", "find_chromium", "require_chromium", "wait_for"]


def require_chromium() -> str:
    """Chromium's path; without it the test skips, except in CI (CI=true), where .ci/run installs it."""
    executable = find_chromium()
    if executable is None:
        message = "Chromium not found (Debian: apt-get install chromium; .ci/run installs it)"
        if os.environ.get("CI", "").lower() in ("true", "1"):
            pytest.fail(f"{message}: required in CI")
        pytest.skip(message)
    return executable


PAGE_WAIT_S = 60  # how long a page may take to show what a test waits for


def wait_for(browser: Chromium, expression: str, what: str, timeout: float = PAGE_WAIT_S):
    """Until ``expression`` is truthy in the page (polls the DOM; fails after ``timeout`` seconds); its value."""
    deadline = time.monotonic() + timeout
    while not (value := browser.evaluate(expression)):
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.05)
    return value


# ------------------------------------------------------------------------------------------------ downloads

SVG = "{http://www.w3.org/2000/svg}"


def allow_downloads(browser: Chromium, folder: Path) -> None:
    """Downloads go to ``folder`` (each file named by its guid) and are reported as events."""
    browser.send("Browser.setDownloadBehavior", {"behavior": "allowAndName", "downloadPath": str(folder),
                                                 "eventsEnabled": True}, session=False)


def download(browser: Chromium, folder, links: str, format: str) -> tuple[str, bytes]:
    """Clicks the ``format`` button of the export links ``links`` (a JS expression) as a user does; the file saved."""
    button = f"{links}.querySelector('button[data-format=\"{format}\"]')"
    x, y = browser.evaluate(f"(() => {{ const b = {button}; b.scrollIntoView({{block: 'center'}});"
                            " const r = b.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; })()")
    browser.click(x, y)
    begun = browser.wait_event("Browser.downloadWillBegin")["params"]
    while True:
        progress = browser.wait_event("Browser.downloadProgress")["params"]
        if progress["guid"] == begun["guid"] and progress["state"] != "inProgress":
            assert progress["state"] == "completed", progress
            return begun["suggestedFilename"], (folder / begun["guid"]).read_bytes()


def read_csv(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))


def svg_cells(data: bytes) -> list[ET.Element]:
    return [rect for rect in ET.fromstring(data).iter(f"{SVG}rect") if rect.get("class") == "cell"]


def png_colours(data: bytes) -> tuple[set[tuple[int, int, int]], tuple[int, int]]:
    from PIL import Image

    with Image.open(io.BytesIO(data)) as image:
        assert image.format == "PNG"
        return {colour for _, colour in image.convert("RGB").getcolors(1 << 20)}, image.size


def rgb(fill: str) -> tuple[int, int, int]:
    return tuple(int(c) for c in fill.removeprefix("rgb(").removesuffix(")").split(","))
