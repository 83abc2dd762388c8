"""The attention tab's circuit views in a real browser (the harness of tests/test_tensorboard_tab_browser.py): a
trained run (composition, copying and loss by index logged at every validation; its checkpoint for the word
tables, the attribution and the typed pair) beside a written run that holds patching recovery. Every number drawn
is checked against what the routes answer.

Without Chromium the tests skip, except in CI (CI=true), where .ci/run installs it and they fail.
"""

from __future__ import annotations

import json
import shutil
import urllib.error

import pytest

from browser import wait_for
from tab_runs import write_run
from tb_server import serve
from test_tensorboard_circuits import LOGGED
from test_tensorboard_tab_browser import (  # noqa: F401 (chromium: the browser fixture, shared)
    choose_run,
    chromium,
    no_dialogs_or_images,
    panel,
    type_sentence,
)

ROUTE = "/data/plugin/attention_lab"


@pytest.fixture(scope="module")
def tensorboard(chromium, request, tmp_path_factory):  # noqa: F811
    logdir = tmp_path_factory.mktemp("circuits_browser")
    shutil.copytree(request.getfixturevalue("tiny_trained_run"), logdir / "tiny")
    write_run(logdir / "written", steps=[50, 100], words=["Life", "is", "short"], scalars=LOGGED, name="")
    with serve(logdir, logdir.parent / "server.log",
               lambda server: len(server.get_json(f"{ROUTE}/runs")["runs"]) == 2, "--load_fast=true") as server:
        yield server


def open_tab(browser, tensorboard) -> tuple[str, str]:
    """The trained run in the first panel, the written one beside it; both showing their circuits."""
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
    return trained, written


def values(browser, index: int, selector: str) -> list:
    cells = browser.evaluate(f"[...{panel(index)}.querySelectorAll({json.dumps(selector)})].map(c => c.dataset.value)")
    return [None if value == "" else float(value) for value in cells]


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
    caption = chromium.evaluate(f"{panel(0)}.querySelector('table[data-view=copying] caption').textContent")
    assert caption == "Copying · step 50 (logged at 49)"


def test_word_tables_follow_the_enlarged_head(chromium, tensorboard):  # noqa: F811
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


def accepted(tensorboard, run: str, pair: dict) -> bool:
    """Whether the route patches ``pair`` (it refuses a pair whose two predictions are the same)."""
    try:
        tensorboard.get_json(f"{ROUTE}/patch_pair", run=run, **pair)
    except urllib.error.HTTPError as refused:
        assert refused.code == 400
        return False
    return True


def test_sentence_attribution_and_typed_pair_patching(chromium, tensorboard):  # noqa: F811
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
    wait_for(chromium, f"{panel(1)}.querySelector('.circuits-sentence').textContent.includes('has no checkpoint')",
             "the written run's message")
    # a pair whose last prediction differs: the first word replaced until the route accepts it
    clean = words[:5]
    pair = next((pair for w in words[5:] if accepted(tensorboard, trained, pair := {
        "clean": " ".join(clean), "corrupted": " ".join([w, *clean[1:]])})), None)
    assert pair is not None
    chromium.evaluate("document.querySelector('section.panel form.pair-form').scrollIntoView({block: 'center'})")
    for field in ("clean", "corrupted"):
        chromium.click(*chromium.center_of(f"section.panel input.pair-{field}"))
        chromium.send("Input.insertText", {"text": pair[field]})
    chromium.click(*chromium.center_of("section.panel button.pair-run"))
    wait_for(chromium, f"{panel(0)}.querySelector('.pair-box').dataset.state === 'patched'", "the patching heatmap")
    data = tensorboard.get_json(f"{ROUTE}/patch_pair", run=trained, **pair)
    assert values(chromium, 0, "[data-view=pair-patching] td.score") == pytest.approx(
        [v for row, whole in zip(data["cells"], data["whole_layer"], strict=True) for v in (*row, whole)])
    summary = chromium.evaluate(f"{panel(0)}.querySelector('.pair-summary').textContent")
    assert f"clean → “{data['clean_prediction']}”" in summary and f"corrupted → “{data['corrupted_prediction']}”" in summary
    no_dialogs_or_images(chromium)
    assert "Traceback" not in tensorboard.log_path.read_text()
