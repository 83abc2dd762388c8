"""The attention tab in a real browser: a TensorBoard server on 127.0.0.1 (the data server loader,
``--load_fast=true``) over two trained runs, a run written with an XSS probe for its words and its name, and a
run without attention records; Debian's Chromium, headless, driven as tests/browser/test_html_browser.py drives it.

Without Chromium the tests skip, except in CI (CI=true), where .ci/run installs it and they fail.
"""

from __future__ import annotations

import json
import shutil

import pytest
from chromium import Chromium, require_chromium, wait_for

from attention_lab.analysis.tags import FAMILIES
from tab_runs import XSS, write_run
from tb_server import serve

# Ablation drops as logged: a head whose removal helps a hair gives a tiny negative "drop"
NEAR_ZERO = {"ablation/zero/loss/layer0/head0": [(20, -0.00004)], "ablation/zero/loss/layer0/head1": [(20, 0.25)],
             "ablation/zero/loss/layer1/head0": [(20, 0.0)]}


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    browser = Chromium(require_chromium(), tmp_path_factory.mktemp("chromium-profile"), width=1400, height=1000)
    yield browser
    browser.close()


@pytest.fixture(scope="module")
def tensorboard(chromium, request, tmp_path_factory):
    # The trained runs are asked for after `chromium`: without a browser they are not trained at all.
    logdir = tmp_path_factory.mktemp("tab_browser")
    shutil.copytree(request.getfixturevalue("solved_run"), logdir / "solved")
    shutil.copytree(request.getfixturevalue("tiny_trained_run"), logdir / "tiny")
    write_run(logdir / "xss", steps=[10, 20], words=["Life", XSS, "first"], name=XSS, scalars=NEAR_ZERO)
    write_run(logdir / "old", steps=[], words=[], maps=False)
    with serve(logdir, logdir.parent / "server.log",
               lambda server: len(server.get_json("/data/plugin/attention_lab/runs")["runs"]) == 4,
               "--load_fast=true") as server:
        yield server


def panel(index: int) -> str:
    return f"document.querySelectorAll('section.panel')[{index}]"


def open_tab(browser: Chromium, tensorboard) -> list[dict]:
    """The tab's own page (what TensorBoard puts in the tab's frame), with the two trained runs side by side
    (it opens on the newest run, written by the fixture), both showing maps."""
    browser.navigate(f"{tensorboard.base_url}/data/plugin_entry.html?name=attention_lab")
    wait_for(browser, "document.body.dataset.ready === 'true'", "tab ready")
    runs = sorted((r for r in tensorboard.get_json("/data/plugin/attention_lab/runs")["runs"]
                   if r["run"].startswith(("solved/", "tiny/"))), key=lambda r: r["run"])  # solved, then tiny
    browser.evaluate(f"(() => {{ const [a, b] = document.querySelectorAll('select.run-select');"
                     f" a.value = {json.dumps(runs[0]['run'])}; b.value = {json.dumps(runs[1]['run'])};"
                     " b.dispatchEvent(new Event('change')); })()")
    wait_for(browser, f"{panel(0)}.dataset.run === {json.dumps(runs[0]['run'])} && {panel(0)}.dataset.state === 'maps'"
                      f" && {panel(1)}.dataset.state === 'maps'", "maps")
    return runs


def no_dialogs_or_images(browser: Chromium) -> None:
    browser.evaluate("0")  # flush pending events
    assert not [e for e in browser.events if e.get("method") == "Page.javascriptDialogOpening"]
    errors = [e["params"] for e in browser.events if e.get("method") == "Runtime.exceptionThrown"]
    assert not errors, errors
    assert browser.evaluate("document.querySelectorAll('img').length") == 0


def test_tab_is_listed_in_tensorboard(chromium, tensorboard):
    """TensorBoard's own page shows the tab, and selecting it loads the tab's page in its frame."""
    chromium.navigate(f"{tensorboard.base_url}/#attention_lab")
    find_frame = """(() => { const stack = [document];
        while (stack.length) { const root = stack.pop();
          for (const el of root.querySelectorAll('*')) {
            if (el.tagName === 'IFRAME' && el.contentDocument && el.contentDocument.body &&
                el.contentDocument.body.dataset.ready === 'true') return el.contentDocument.body.innerText;
            if (el.shadowRoot) stack.push(el.shadowRoot); } }
        return null; })()"""
    text = wait_for(chromium, find_frame, "tab frame")
    runs = tensorboard.get_json("/data/plugin/attention_lab/runs")["runs"]
    assert runs[0]["label"] in text and "Step" in text  # the newest run, by its readable name
    assert "attention" in chromium.evaluate("document.body.innerText").lower()


def test_maps_render_for_two_runs_side_by_side(chromium, tensorboard):
    chromium.send("Network.enable")
    runs = open_tab(chromium, tensorboard)
    requests = [e["params"]["request"]["url"] for e in chromium.events if e.get("method") == "Network.requestWillBeSent"]
    assert any(url.endswith("/head_view.js") for url in requests)
    assert all(url.startswith((tensorboard.base_url, "about:")) for url in requests), requests  # works offline
    first, second = (r["run"] for r in runs[:2])
    assert chromium.evaluate(f"[{panel(0)}.dataset.run, {panel(1)}.dataset.run]") == [first, second]
    boxes = chromium.evaluate("[...document.querySelectorAll('section.panel')].map(p => {"
                              " const r = p.getBoundingClientRect(); return [r.left, r.right, r.top, r.width]; })")
    assert boxes[0][1] <= boxes[1][0] and boxes[0][2] == boxes[1][2] and min(b[3] for b in boxes) > 300
    data = tensorboard.get_json("/data/plugin/attention_lab/maps", run=first)
    assert chromium.evaluate(f"+{panel(0)}.dataset.step") == data["step"] == data["steps"][-1]
    # every layer and head as a small map, each cell coloured from its weight
    minis = chromium.evaluate(f"[...{panel(0)}.querySelectorAll('svg.heatmap.mini')].map(s => "
                              "[+s.dataset.layer, +s.dataset.head, [...s.querySelectorAll('rect.cell')]"
                              ".map(r => +r.dataset.weight)])")
    assert [(layer, head) for layer, head, _ in minis] == [(layer, head) for layer in range(2) for head in range(4)]
    for layer, head, weights in minis:
        assert weights == pytest.approx([w for row in data["weights"][layer][head] for w in row], abs=1e-6)
    fills = chromium.evaluate(f"new Set([...{panel(0)}.querySelectorAll('rect.cell')].map(r => r.getAttribute('fill'))).size")
    assert fills > 20  # drawn in many colours, not blank
    # every head score and both ablations of the final validation (attention_lab.analysis.tags); reverse has no
    # corruption to patch or attribute
    assert chromium.evaluate(f"{panel(0)}.querySelectorAll('table.score-grid').length") == len(FAMILIES) - 3
    no_dialogs_or_images(chromium)


def test_slider_moves_every_map_to_another_step(chromium, tensorboard):
    runs = open_tab(chromium, tensorboard)
    own = [tensorboard.get_json("/data/plugin/attention_lab/maps", run=r["run"])["steps"] for r in runs[:2]]
    steps = sorted(set(own[0]) | set(own[1]))  # the slider offers both runs' steps
    x, y = chromium.center_of("input.step-slider")
    width = chromium.evaluate("document.querySelector('input.step-slider').getBoundingClientRect().width")
    chromium.click(x - width / 2 + 2, y)  # a real click at the slider's left end: the first step
    # each run shows its own step logged last at or before the first step (its first one otherwise)
    expected = [max((s for s in logged if s <= steps[0]), default=min(logged)) for logged in own]
    assert steps[0] in expected
    wait_for(chromium, " && ".join(f"{panel(i)}.dataset.step === '{step}' && {panel(i)}.dataset.state === 'maps'"
                                   for i, step in enumerate(expected)), "the first step")
    assert chromium.evaluate("document.querySelector('.step-label').textContent") == str(steps[0])
    for i, step in enumerate(expected):
        data = tensorboard.get_json("/data/plugin/attention_lab/maps", run=runs[i]["run"], step=str(step))
        shown = chromium.evaluate(f"[...{panel(i)}.querySelectorAll('svg.heatmap.mini')[5].querySelectorAll('rect.cell')]"
                                  ".map(r => +r.dataset.weight)")
        assert shown == pytest.approx([w for row in data["weights"][1][1] for w in row], abs=1e-6)
        last = tensorboard.get_json("/data/plugin/attention_lab/maps", run=runs[i]["run"])
        assert shown != pytest.approx([w for row in last["weights"][1][1] for w in row], abs=1e-6)
        assert chromium.evaluate(f"{panel(i)}.querySelector('.source').textContent").endswith(f"at step {step}")
        note = chromium.evaluate(f"{panel(i)}.querySelector('.message').textContent")
        assert note == ("" if step == steps[0] else f"no maps at or before step {steps[0]}: showing the first logged step")


def test_hover_shows_words_and_weight_and_click_enlarges(chromium, tensorboard):
    runs = open_tab(chromium, tensorboard)
    data = tensorboard.get_json("/data/plugin/attention_lab/maps", run=runs[0]["run"])
    chromium.click(*chromium.center_of("section.panel button.mini-map[data-layer='1'][data-head='2']"))
    assert chromium.evaluate(f"{panel(0)}.querySelector('.detail-title').textContent") == "layer 1, head 2"
    chromium.evaluate("document.querySelector('section.panel svg.heatmap.large').scrollIntoView({block: 'center'})")
    chromium.mouse("mouseMoved", *chromium.center_of("section.panel svg.heatmap.large rect[data-q='1'][data-k='2']"))
    words = data["key_words"]
    weight = data["weights"][1][2][1][2]
    expected = f"layer 1 · head 2 · query “{words[1]}” → key “{words[2]}” · weight {weight:.2f}"
    assert chromium.evaluate(f"{panel(0)}.querySelector('.hover-info').textContent") == expected
    # the head view below follows the chosen head, with the shared renderer's lines
    assert "layer 1 of 2 · head 2 of 4" in chromium.evaluate(f"{panel(0)}.querySelector('.hv-status').textContent")
    lines = chromium.evaluate(f"[...{panel(0)}.querySelectorAll('line.attn')].map(l => [+l.dataset.head, "
                              "+l.dataset.q, +l.dataset.k, +l.getAttribute('stroke-opacity')])")
    assert len(lines) == len(words) ** 2 and {head for head, *_ in lines} == {2}
    for _, q, k, opacity in lines:
        assert opacity == pytest.approx(data["weights"][1][2][q][k], abs=1e-6)
    no_dialogs_or_images(chromium)


def type_sentence(browser: Chromium, text: str) -> None:
    browser.click(*browser.center_of("input.sentence-input"))
    browser.send("Input.insertText", {"text": text})
    browser.click(*browser.center_of("button.sentence-run"))


def test_sentence_box_returns_maps_and_the_probe_stays_text(chromium, tensorboard):
    open_tab(chromium, tensorboard)
    text = f"Your journey starts with {XSS} one step"
    type_sentence(chromium, text)
    wait_for(chromium, f"{panel(0)}.querySelector('.source').textContent.startsWith('your sentence')"
                       f" && {panel(1)}.querySelector('.source').textContent.startsWith('your sentence')"
                       f" && {panel(0)}.dataset.state === 'maps'", "the sentence's maps")
    reply = tensorboard.get_json("/data/plugin/attention_lab/sentence",
                                 run=chromium.evaluate(f"{panel(0)}.dataset.run"), text=text)
    assert "<unk>" in reply["words"]
    axis = chromium.evaluate(f"[...{panel(0)}.querySelectorAll('svg.heatmap.large text.axis-word')]"
                             ".map(t => t.textContent)")
    assert axis == reply["query_words"] + reply["key_words"]  # <unk> shown as text
    assert chromium.evaluate(f"{panel(0)}.querySelectorAll('svg.heatmap.mini').length") == 8
    assert "shown as <unk>" in chromium.evaluate(f"{panel(0)}.querySelector('.message').textContent")
    assert chromium.evaluate("document.querySelector('input.sentence-input').value") == text
    no_dialogs_or_images(chromium)
    chromium.click(*chromium.center_of("button.sentence-clear"))
    assert chromium.evaluate(f"{panel(0)}.querySelector('.source').textContent").startswith("probe")


def choose_run(browser: Chromium, index: int, run: str) -> None:
    browser.evaluate(f"(() => {{ const s = document.querySelectorAll('select.run-select')[{index}];"
                     f" s.value = {json.dumps(run)}; s.dispatchEvent(new Event('change')); }})()")


def test_xss_probe_and_run_name_stay_text_and_messages_replace_blank_panels(chromium, tensorboard):
    open_tab(chromium, tensorboard)
    runs = tensorboard.get_json("/data/plugin/attention_lab/runs")["runs"]
    xss_run = next(r["run"] for r in runs if r["run"].startswith("xss/"))
    old_run = next(r["run"] for r in runs if not r["has_maps"])
    choose_run(chromium, 0, xss_run)
    choose_run(chromium, 1, old_run)
    wait_for(chromium, f"{panel(0)}.dataset.state === 'maps' && {panel(1)}.dataset.state === 'message'",
             "the XSS run's maps and the old run's message")
    assert chromium.evaluate(f"[{panel(0)}.querySelector('.run-name').textContent, "
                             f"{panel(0)}.querySelector('.run-name').title]") == [f"{XSS} · xss", xss_run]
    assert chromium.evaluate(f"[...{panel(0)}.querySelectorAll('td.score')].map(td => td.textContent)") == [
        "0", "0.250", "0", "–"]  # -0.00004 and 0.0 print as 0, never -0.000
    assert XSS in chromium.evaluate(f"{panel(0)}.querySelector('.source').textContent")
    axis = chromium.evaluate(f"[...{panel(0)}.querySelectorAll('svg.heatmap.large text.axis-word')].map(t => t.textContent)")
    assert axis.count(XSS) == 2  # a row and a column
    assert "no attention records" in chromium.evaluate(f"{panel(1)}.querySelector('.message').textContent")
    type_sentence(chromium, XSS)  # the XSS run has no checkpoint: a message, not a blank panel
    wait_for(chromium, f"{panel(0)}.dataset.state === 'message'", "the missing checkpoint's message")
    assert "has no checkpoint" in chromium.evaluate(f"{panel(0)}.querySelector('.message').textContent")
    assert axis == chromium.evaluate(f"[...{panel(0)}.querySelectorAll('svg.heatmap.large text.axis-word')]"
                                     ".map(t => t.textContent)")  # its logged maps stay under the message
    chromium.click(*chromium.center_of("button.sentence-clear"))
    assert chromium.evaluate(f"[{panel(0)}.dataset.state, {panel(1)}.dataset.state]") == ["maps", "message"]
    assert "no attention records" in chromium.evaluate(f"{panel(1)}.querySelector('.message').textContent")
    no_dialogs_or_images(chromium)
    assert "Traceback" not in tensorboard.log_path.read_text()

