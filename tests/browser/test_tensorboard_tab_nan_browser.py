"""Weights a model made NaN or infinite, drawn by the attention tab in a real browser: they arrive as null, the
maps and the head view draw them (as missing) without a script error. A TensorBoard server on 127.0.0.1 with the
data server loader, Debian's Chromium headless, as tests/browser/test_tensorboard_tab_browser.py drives them."""

from __future__ import annotations

import numpy as np
import pytest
from chromium import Chromium, require_chromium, wait_for
from test_tensorboard_tab_bounds import write_probe

from tb_server import serve

PANEL = "document.querySelector('section.panel')"


@pytest.fixture
def chromium(tmp_path):
    (tmp_path / "chromium-profile").mkdir()
    browser = Chromium(require_chromium(), tmp_path / "chromium-profile", width=1400, height=1000)
    yield browser
    browser.close()


def test_nan_weights_are_drawn_as_missing(chromium, tmp_path):
    from tensorboard.util import tensor_util

    weights = np.full((1, 2, 2, 2), 0.5, dtype=np.float16)
    weights[:, :, 0, 0], weights[:, :, 1, 1] = np.nan, np.inf
    write_probe(tmp_path / "logdir" / "nan", ["Life", "is"], tensor_util.make_tensor_proto(weights))
    with serve(tmp_path / "logdir", tmp_path / "server.log",
               lambda server: len(server.get_json("/data/plugin/attention_lab/runs")["runs"]) == 1,
               "--load_fast=true") as server:
        chromium.navigate(f"{server.base_url}/data/plugin_entry.html?name=attention_lab")
        wait_for(chromium, f"document.body.dataset.ready === 'true' && {PANEL}.dataset.state === 'maps'", "maps")
        cells = chromium.evaluate(f"[...{PANEL}.querySelectorAll('svg.heatmap.mini rect.cell')]"
                                  ".map(r => [r.dataset.weight, r.getAttribute('fill')])")
        assert [weight for weight, _ in cells] == ["null", "0.5", "0.5", "null"] * 2
        assert all(fill.startswith("rgb(") for _, fill in cells)
        chromium.mouse("mouseMoved", *chromium.center_of("section.panel svg.heatmap.large rect[data-q='0'][data-k='0']"))
        assert chromium.evaluate(f"{PANEL}.querySelector('.hover-info').textContent").endswith("weight –")
        lines = chromium.evaluate(f"[...{PANEL}.querySelectorAll('line.attn')].map(l => [l.dataset.weight, "
                                  "l.getAttribute('stroke-opacity')])")
        assert lines and all(opacity == ("0" if weight == "null" else weight) for weight, opacity in lines)
        chromium.evaluate("0")  # flush pending events
        errors = [e["params"] for e in chromium.events if e.get("method") == "Runtime.exceptionThrown"]
        assert not errors, errors
