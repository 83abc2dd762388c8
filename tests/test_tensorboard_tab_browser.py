"""The attention tab in a real browser: a TensorBoard server on 127.0.0.1 (the data server loader,
``--load_fast=true``) over two trained runs, a run written with an XSS probe for its words and its name, and a
run without attention records; Debian's Chromium, headless, driven as tests/test_html_browser.py drives it.

Without Chromium the tests skip, except in CI (CI=true), where .ci/run installs it and they fail.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from attention_lab.head_metrics import ABLATIONS, FAMILIES, ablation_family, score_family
from attention_lab.tensorboard_logger import tensorboard_tag
from browser import Chromium, require_chromium, wait_for
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
    # every head score and both ablations of the final validation (attention_lab.head_metrics); reverse has no
    # corruption to patch
    assert chromium.evaluate(f"{panel(0)}.querySelectorAll('table.score-grid').length") == len(FAMILIES) - 2
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


# ---------------------------------------------------------------------------------------------- the first hour

SECTION_TITLES = """(() => { const titles = [];
    const walk = node => { for (const el of node.children) {
        if (el.matches('span.category-name')) titles.push(el.textContent.trim());
        if (el.shadowRoot) walk(el.shadowRoot);
        walk(el); } };
    walk(document); return titles; })()"""  # the Scalars tab's section titles, in page order


@pytest.fixture(scope="module")
def first_hour(chromium, request, tmp_path_factory):
    """TensorBoard over a fresh default run (`python scripts/train.py`, nothing set but quiet output and where it
    goes) beside an older run: what a new user sees first."""
    from conftest import SINGLE_THREAD_ENV, run_train

    logdir = tmp_path_factory.mktemp("first_hour")
    shutil.copytree(request.getfixturevalue("tiny_trained_run"), logdir / "older")
    with pytest.MonkeyPatch.context() as mp:
        for key, value in SINGLE_THREAD_ENV.items():
            mp.setenv(key, value)
        run_train(logdir / "fresh")
    with serve(logdir, logdir.parent / "first_hour_server.log",
               lambda server: len(server.get_json("/data/plugin/attention_lab/runs")["runs"]) == 2,
               "--load_fast=true") as server:
        yield server


def test_scalars_open_on_loss_and_accuracy(chromium, first_hour):
    """The first section of the Scalars tab holds the run's loss and accuracy curves: the tags of the Custom Scalars
    chart 'loss and accuracy', as the run recorded it."""
    chromium.navigate(f"{first_hour.base_url}/#scalars")
    titles = wait_for(chromium, SECTION_TITLES, "the Scalars tab's sections")
    run = "fresh/tensorboard"
    layout = first_hour.get_json("/data/plugin/custom_scalars/layout")
    patterns = [p for category in layout["category"] for chart in category["chart"] for p in chart["multiline"]["tag"]]
    logged = list(first_hour.get_json("/data/plugin/scalars/tags")[run])
    curves = [tag for tag in logged if any(re.fullmatch(p, tag) for p in patterns)]
    assert len(curves) >= 6, curves  # loss, token and sequence accuracy, for training and validation
    assert [tag for tag in curves if not tag.startswith(titles[0] + "/")] == [], titles


def test_the_tab_opens_on_the_newest_run_and_its_task_head(chromium, first_hour):
    chromium.navigate(f"{first_hour.base_url}/data/plugin_entry.html?name=attention_lab")
    wait_for(chromium, f"document.body.dataset.ready === 'true' && {panel(0)}.dataset.state === 'maps'", "maps")
    runs = first_hour.get_json("/data/plugin/attention_lab/runs")["runs"]
    assert [r["label"] for r in runs] == ["default settings · fresh", runs[1]["label"]]
    assert runs[1]["label"].endswith(" · older") and runs[1]["label"] != runs[1]["run"]
    assert chromium.evaluate(f"[{panel(0)}.dataset.run, {panel(0)}.querySelector('.run-name').textContent,"
                             " document.querySelector('select.run-select').selectedOptions[0].textContent]") == [
        "fresh/tensorboard", "default settings · fresh", "default settings · fresh"]
    # the enlarged head and the head view: the run's best reverse head, an anti-diagonal head of layer 1
    maps = first_hour.get_json("/data/plugin/attention_lab/maps", run="fresh/tensorboard")
    scores = first_hour.get_json("/data/plugin/attention_lab/scores", run="fresh/tensorboard", step=str(maps["step"]))
    focus = scores["focus"]
    assert focus["kind"] == "reverse" and focus["layer"] == 1 and focus["score"] > 0.9
    layer, head = focus["layer"], focus["head"]
    assert chromium.evaluate(f"{panel(0)}.querySelector('.detail-title').textContent") == f"layer {layer}, head {head}"
    assert chromium.evaluate(f"[...{panel(0)}.querySelectorAll('button.mini-map.selected')]"
                             ".map(b => [+b.dataset.layer, +b.dataset.head])") == [[layer, head]]
    assert f"layer {layer} of 2 · head {head} of 4" in chromium.evaluate(f"{panel(0)}.querySelector('.hv-status').textContent")
    assert chromium.evaluate(f"[...new Set([...{panel(0)}.querySelectorAll('line.attn')].map(l => +l.dataset.head))]") == [head]
    # the heads of layer 1 read the mirrored word: removing one costs nothing, and the tab says why. Which heads
    # those are is the run's to decide; the line names exactly those that look essential (score >= 0.5 on the
    # task's kind) yet cost at most 0.01 of token accuracy under every ablation (docs/tensorboard.md)
    note = chromium.evaluate(f"{panel(0)}.querySelector('.redundancy').textContent")
    assert scores["redundancy"] and note == f"{scores['redundancy']} Why: docs/tensorboard.md#redundant-heads"
    cells = {grid["family"]: grid["cells"] for grid in scores["grids"]}
    kind, drops = cells[score_family("reverse")], [cells[ablation_family(how, "token_acc")] for how in ABLATIONS]
    redundant = {layer: [head for head, score in enumerate(row) if score is not None and score >= 0.5
                         and all(d[layer][head] is not None and d[layer][head] <= 0.01 for d in drops)]
                 for layer, row in enumerate(kind)}
    assert redundant[1], redundant  # layer 1 shares the task between heads
    named = "; ".join(f"layer {layer} head{'s' if len(heads) > 1 else ''} {', '.join(map(str, heads))}"
                      for layer, heads in redundant.items() if heads)
    assert note.startswith(f"Scores and ablations disagree: {named} score "), (redundant, note)
    header = chromium.evaluate("document.querySelector('.tab-status').textContent")
    assert "unless started with --samples_per_plugin=attention_lab=0, which keeps every step" in header
    Path(first_hour.log_path.parent / "first_view.png").write_bytes(chromium.screenshot())
    no_dialogs_or_images(chromium)


def test_scores_and_maps_name_the_same_step(chromium, first_hour):
    """The first validation (after step n, logged by Lightning at n - 1) beside the maps of step n, both as step n.
    The maps are logged more often than the validation runs: the first step with both is the first validated one."""
    chromium.navigate(f"{first_hour.base_url}/data/plugin_entry.html?name=attention_lab")
    wait_for(chromium, f"document.body.dataset.ready === 'true' && {panel(0)}.dataset.state === 'maps'", "maps")
    runs = first_hour.get_json("/data/plugin/attention_lab/runs")["runs"]
    steps = [first_hour.get_json("/data/plugin/attention_lab/maps", run=r["run"])["steps"] for r in runs]
    logged = first_hour.get_json("/data/plugin/scalars/scalars", run="fresh/tensorboard", tag=tensorboard_tag("val/loss"))
    first = min(step for step in steps[0] if step - 1 in [point[1] for point in logged])
    index = sorted(set(steps[0]) | set(steps[1])).index(first)  # the slider offers both runs' steps
    chromium.evaluate(f"(() => {{ const s = document.querySelector('input.step-slider'); s.value = '{index}';"
                      " s.dispatchEvent(new Event('input')); })()")
    wait_for(chromium, f"{panel(0)}.dataset.step === '{first}' && {panel(0)}.dataset.state === 'maps'", "the first step")
    captions = chromium.evaluate(f"[...{panel(0)}.querySelectorAll('table.score-grid caption')].map(c => c.textContent)")
    assert captions and all(caption.endswith(f" · step {first}") for caption in captions), captions
    assert chromium.evaluate(f"{panel(0)}.querySelector('.source').textContent").endswith(f"at step {first}")
    # the step the Scalars tab shows for the same validation, in the captions' tooltips
    titles = chromium.evaluate(f"[...{panel(0)}.querySelectorAll('table.score-grid caption')].map(c => c.title)")
    assert all(title.endswith(f"which Lightning logs at step {first - 1})") for title in titles), titles


def test_hover_text_follows_a_new_sentence(chromium, first_hour):
    """The cursor rests on the last cell of the enlarged map while a shorter sentence is sent with Enter: its map
    no longer reaches the cursor, so the line under the maps goes back to the hint instead of keeping the probe's
    words (no mouseleave comes from a map taken out of the page)."""
    # tall enough to show the whole panel unscrolled: a page that shrinks under a scrolled view would scroll it
    chromium.send("Emulation.setDeviceMetricsOverride", {"width": 1400, "height": 2000, "deviceScaleFactor": 1,
                                                         "mobile": False})
    try:
        chromium.navigate(f"{first_hour.base_url}/data/plugin_entry.html?name=attention_lab")
        wait_for(chromium, f"document.body.dataset.ready === 'true' && {panel(0)}.dataset.state === 'maps'", "maps")
        probe_words = first_hour.get_json("/data/plugin/attention_lab/maps", run="fresh/tensorboard")["key_words"]
        text = " ".join(probe_words[:3])  # known words: no note above the maps
        chromium.click(*chromium.center_of("input.sentence-input"))
        chromium.send("Input.insertText", {"text": text})  # typed, not sent yet
        last = len(probe_words) - 1
        cell = f"{panel(0)}.querySelector('svg.heatmap.large rect[data-q=\"{last}\"][data-k=\"{last}\"]')"
        x, y = chromium.evaluate(f"(() => {{ const r = {cell}.getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()")
        chromium.mouse("mouseMoved", x, y)
        hovered = chromium.evaluate(f"{panel(0)}.querySelector('.hover-info').textContent")
        assert f"query “{probe_words[last]}” → key “{probe_words[last]}”" in hovered
        scrolled = chromium.evaluate("scrollY")
        for kind in ("keyDown", "keyUp"):
            chromium.send("Input.dispatchKeyEvent", {"type": kind, "key": "Enter", "code": "Enter",
                                                     "windowsVirtualKeyCode": 13, **({"text": "\r"} if kind == "keyDown" else {})})
        wait_for(chromium, f"{panel(0)}.querySelector('.source').textContent.startsWith('your sentence')"
                           f" && {panel(0)}.dataset.state === 'maps'", "the sentence's maps")
        assert chromium.evaluate("scrollY") == scrolled  # the cursor stayed where it was on the page
        assert chromium.evaluate(f"document.elementFromPoint({x}, {y}).matches('rect.cell')") is False
        assert chromium.evaluate(f"{panel(0)}.querySelector('.hover-info').textContent") == "hover a cell for its words and weight"
    finally:
        chromium.send("Emulation.clearDeviceMetricsOverride")
    no_dialogs_or_images(chromium)
