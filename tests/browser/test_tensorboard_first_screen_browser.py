"""What a new user sees first, in a real browser (the harness of tests/browser/test_tensorboard_tab_browser.py): TensorBoard
over a fresh default run (`python scripts/train.py`, nothing set but quiet output and where it goes) beside an older
run, in a 1280x800 window. The attention tab is opened inside TensorBoard's own page (its bar above, the tab in its
frame), as a person opens it: its first screen holds the enlarged map and the step slider; every step a view
prints is the step of its maps; the enlarged head stays while the slider moves and the best one is marked; the
sentence box lists the words the run knows; the patching box's example pair patches.

Without Chromium the tests skip, except in CI (CI=true), where .ci/run installs it and they fail.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from chromium import Chromium, require_chromium, wait_for
from test_tensorboard_tab_browser import no_dialogs_or_images, panel

from attention_lab.analysis.tags import ABLATIONS, ablation_family, score_family
from attention_lab.tensorboard_logger import tensorboard_tag
from tb_server import serve

WIDTH, HEIGHT = 1280, 800  # the window the tab's first screen is made for
ROUTE = "/data/plugin/attention_lab"
SECTION_TITLES = """(() => { const titles = [];
    const walk = node => { for (const el of node.children) {
        if (el.matches('span.category-name')) titles.push(el.textContent.trim());
        if (el.shadowRoot) walk(el.shadowRoot);
        walk(el); } };
    walk(document); return titles; })()"""  # the Scalars tab's section titles, in page order
# The tab's frame in TensorBoard's page (inside shadow roots), once the tab is drawn: kept as window.TAB.
FIND_TAB = """(() => { const stack = [document];
    while (stack.length) { const root = stack.pop();
      for (const el of root.querySelectorAll('*')) {
        if (el.tagName === 'IFRAME' && el.contentDocument && el.contentDocument.body &&
            el.contentDocument.body.dataset.ready === 'true') { window.TAB = el; return true; }
        if (el.shadowRoot) stack.push(el.shadowRoot); } }
    return null; })()"""


@pytest.fixture(scope="module")
def chromium(tmp_path_factory):
    browser = Chromium(require_chromium(), tmp_path_factory.mktemp("chromium-profile"), width=WIDTH, height=HEIGHT)
    yield browser
    browser.close()


@pytest.fixture(scope="module")
def first_hour_logdir(chromium, request, tmp_path_factory) -> Path:
    """A fresh default run beside an older one (the older copied first: the fresh one is the newest)."""
    from conftest import SINGLE_THREAD_ENV, run_train

    logdir = tmp_path_factory.mktemp("first_hour")
    shutil.copytree(request.getfixturevalue("tiny_trained_run"), logdir / "older")
    with pytest.MonkeyPatch.context() as mp:
        for key, value in SINGLE_THREAD_ENV.items():
            mp.setenv(key, value)
        run_train(logdir / "fresh")
    return logdir


@pytest.fixture(scope="module")
def first_hour(first_hour_logdir):
    with serve(first_hour_logdir, first_hour_logdir.parent / "first_hour_server.log",
               lambda server: len(server.get_json(f"{ROUTE}/runs")["runs"]) == 2, "--load_fast=true") as server:
        yield server


@pytest.fixture(scope="module")
def fresh_run(first_hour) -> str:
    """The fresh default run's name in TensorBoard (``fresh/tensorboard/...``): the newest, the first panel."""
    return next(r["run"] for r in first_hour.get_json(f"{ROUTE}/runs")["runs"] if r["run"].startswith("fresh/"))


def open_tab_page(browser: Chromium, server) -> None:
    """The tab's own page (what TensorBoard puts in its frame), both panels showing maps."""
    browser.navigate(f"{server.base_url}/data/plugin_entry.html?name=attention_lab")
    wait_for(browser, f"document.body.dataset.ready === 'true' && {panel(0)}.dataset.state === 'maps'"
                      f" && {panel(1)}.dataset.state === 'maps'", "maps")


def click(browser: Chromium, selector: str) -> None:
    """A real click on ``selector``, scrolled into view first."""
    browser.evaluate(f"document.querySelector({json.dumps(selector)}).scrollIntoView({{block: 'center'}})")
    browser.click(*browser.center_of(selector))


def move_slider(browser: Chromium, index: int) -> None:
    browser.evaluate(f"(() => {{ const s = document.querySelector('input.step-slider'); s.value = '{index}';"
                     " s.dispatchEvent(new Event('input')); })()")


def test_scalars_open_on_loss_and_accuracy(chromium, first_hour, fresh_run):
    """The first section of the Scalars tab holds the run's loss and accuracy curves: the tags of the Custom Scalars
    chart 'loss and accuracy', as the run recorded it."""
    chromium.navigate(f"{first_hour.base_url}/#scalars")
    titles = wait_for(chromium, SECTION_TITLES, "the Scalars tab's sections")
    layout = first_hour.get_json("/data/plugin/custom_scalars/layout")
    patterns = [p for category in layout["category"] for chart in category["chart"] for p in chart["multiline"]["tag"]]
    tags = first_hour.get_json("/data/plugin/scalars/tags")
    logged = list(tags[fresh_run])
    curves = [tag for tag in logged if any(re.fullmatch(p, tag) for p in patterns)]
    assert len(curves) >= 6, curves  # loss, token and sequence accuracy, for training and validation
    assert [tag for tag in curves if not tag.startswith(titles[0] + "/")] == [], titles


def test_the_first_screen_holds_the_enlarged_best_head_and_the_slider(chromium, first_hour, tmp_path, fresh_run):
    """In TensorBoard's page at 1280x800, unscrolled: both panels' enlarged maps and the step slider lie wholly in
    the window; the enlarged head is the run's best reverse head, marked ★; the small maps are large enough to read
    a stripe (at least 9 px a word for a probe of up to 12 words); scores and ablations wait one click away."""
    chromium.navigate(f"{first_hour.base_url}/#attention_lab")
    wait_for(chromium, FIND_TAB, "the tab in TensorBoard's frame")
    tab = "TAB.contentDocument"
    wait_for(chromium, f"[...{tab}.querySelectorAll('section.panel')].every(p => p.dataset.state === 'maps')"
                       f" && {tab}.querySelector('.vocabulary').dataset.state === 'listed'", "both panels drawn")
    boxes = chromium.evaluate(f"""(() => {{ const frame = TAB.getBoundingClientRect();
        return [...{tab}.querySelectorAll('svg.heatmap.large, input.step-slider')].map(e => {{
          const r = e.getBoundingClientRect();
          return [e.tagName, r.left + frame.left, r.top + frame.top, r.right + frame.left, r.bottom + frame.top]; }});
        }})()""")
    Path(tmp_path / "first_screen.png").write_bytes(chromium.screenshot())  # what was measured, when it fails
    assert sorted(tag for tag, *_ in boxes) == ["INPUT", "svg", "svg"], boxes  # the slider, two enlarged maps
    for tag, left, top, right, bottom in boxes:
        assert 0 <= left < right <= WIDTH and 0 <= top < bottom <= HEIGHT, (tag, left, top, right, bottom)
    assert chromium.evaluate(f"[scrollY, {tab}.defaultView.scrollY]") == [0, 0]
    runs = first_hour.get_json(f"{ROUTE}/runs")["runs"]
    assert [r["label"] for r in runs] == ["default settings · fresh", runs[1]["label"]]
    assert runs[1]["label"].endswith(" · older") and runs[1]["label"] != runs[1]["run"]
    first = f"{tab}.querySelectorAll('section.panel')[0]"
    assert chromium.evaluate(f"[{first}.dataset.run, {first}.querySelector('.run-name').textContent,"
                             f" {tab}.querySelector('select.run-select').selectedOptions[0].textContent]") == [
        fresh_run, "default settings · fresh", "default settings · fresh"]
    maps = first_hour.get_json(f"{ROUTE}/maps", run=fresh_run)
    focus = first_hour.get_json(f"{ROUTE}/scores", run=fresh_run, step=str(maps["step"]))["focus"]
    assert focus["kind"] == "reverse" and focus["layer"] == 1 and focus["score"] > 0.9
    assert chromium.evaluate(f"{first}.querySelector('.detail-title').textContent") == \
        f"layer {focus['layer']}, head {focus['head']}"
    assert chromium.evaluate(f"[...{first}.querySelectorAll('button.mini-map.best')]"
                             ".map(b => [+b.dataset.layer, +b.dataset.head])") == [[focus["layer"], focus["head"]]]
    assert "★ the best reverse head here" in chromium.evaluate(f"{first}.querySelector('.focus-note').textContent")
    layer, head = focus["layer"], focus["head"]  # the head view below shows the same head
    assert f"layer {layer} of 2 · head {head} of 4" in chromium.evaluate(f"{first}.querySelector('.hv-status').textContent")
    assert chromium.evaluate(f"[...new Set([...{first}.querySelectorAll('line.attn')].map(l => +l.dataset.head))]") == [head]
    words = max(len(maps["query_words"]), len(maps["key_words"]))
    side = chromium.evaluate(f"{first}.querySelector('svg.heatmap.mini').getBoundingClientRect().width")
    assert side >= 9 * min(words, 12), side
    # the tables are in the page, collapsed: nothing of them on the first screen, the redundancy note included
    assert chromium.evaluate(f"[...{tab}.querySelectorAll('details.section')].map(d => d.open)") == [False] * 4
    assert chromium.evaluate(f"{first}.querySelector('table.score-grid').checkVisibility()") is False
    assert chromium.evaluate(f"{first}.querySelector('.redundancy').checkVisibility()") is False
    assert chromium.evaluate(f"{tab}.querySelector('.help-more').open") is False  # the flags, one click away
    assert "--samples_per_plugin=attention_lab=0" in chromium.evaluate(f"{tab}.querySelector('.help-more').textContent")


def test_the_redundant_heads_are_named_one_click_away(chromium, first_hour, fresh_run):
    """The heads of layer 1 read the mirrored word: removing one costs nothing, and the scores section says why.
    Which heads those are is the run's to decide; the line names exactly those that look essential (score >= 0.5
    on the task's kind) yet cost at most 0.01 of token accuracy under every ablation (docs/tensorboard.md)."""
    open_tab_page(chromium, first_hour)
    scores = first_hour.get_json(f"{ROUTE}/scores", run=fresh_run, step=chromium.evaluate(f"{panel(0)}.dataset.step"))
    click(chromium, "section.panel details.scores-section > summary")
    note = chromium.evaluate(f"{panel(0)}.querySelector('.redundancy').textContent")
    assert chromium.evaluate(f"{panel(0)}.querySelector('.redundancy').checkVisibility()") is True
    assert scores["redundancy"] and note.startswith(f"{scores['redundancy']} Why?")
    why = f"{panel(0)}.querySelector('.redundancy details.why')"
    assert chromium.evaluate(f"{why}.open") is False  # the explanation is one click away, in the page itself
    click(chromium, "section.panel .redundancy details.why > summary")
    assert chromium.evaluate(f"{why}.open") is True
    assert note.endswith(f"{scores['redundancy_why']} More: docs/tensorboard.md#redundant-heads")
    cells = {grid["family"]: grid["cells"] for grid in scores["grids"]}
    kind, drops = cells[score_family("reverse")], [cells[ablation_family(how, "token_acc")] for how in ABLATIONS]
    redundant = {layer: [head for head, score in enumerate(row) if score is not None and score >= 0.5
                         and all(d[layer][head] is not None and d[layer][head] <= 0.01 for d in drops)]
                 for layer, row in enumerate(kind)}
    assert redundant[1], redundant  # layer 1 shares the task between heads
    named = "; ".join(f"layer {layer} head{'s' if len(heads) > 1 else ''} {', '.join(map(str, heads))}"
                      for layer, heads in redundant.items() if heads)
    assert note.startswith(f"Scores and ablations disagree: {named} score "), (redundant, note)
    no_dialogs_or_images(chromium)


LABELS = "details.section[open] > summary, details.section[open] caption"  # the sections' titles, the tables'
ROW_STEPS = "details.section[open] .loss-by-index text.row-step"  # the loss-by-index rows' steps (first, last)


def printed_steps(browser: Chromium, index: int, selector: str) -> list[int]:
    """Every step number printed by the elements of ``selector`` in panel ``index`` that are drawn."""
    texts = browser.evaluate(f"[...{panel(index)}.querySelectorAll({json.dumps(selector)})]"
                             ".filter(e => e.checkVisibility()).map(e => e.textContent)")
    return [int(step) for text in texts for step in re.findall(r"step (\d+)", text)]


def test_every_table_in_view_prints_the_step_of_the_maps(chromium, first_hour, fresh_run):
    """One step label per view, at the last step and at the first validated one (the validation after step n is
    logged by Lightning at n - 1, and shown with the maps of step n): the maps' step is the only step printed on the
    tables of both panels, in the scores' and the circuits' sections, and the loss-by-index rows are labelled
    with the steps of maps (never the n - 1 of Lightning's numbering)."""
    open_tab_page(chromium, first_hour)
    for index in range(2):
        for name in ("scores-section", "circuits"):
            click(chromium, f"section.panel:nth-child({index + 1}) details.{name} > summary")
    runs = first_hour.get_json(f"{ROUTE}/runs")["runs"]
    steps = [first_hour.get_json(f"{ROUTE}/maps", run=r["run"])["steps"] for r in runs]
    validated = [point[1] for point in first_hour.get_json("/data/plugin/scalars/scalars", run=fresh_run,
                                                           tag=tensorboard_tag("val/loss"))]
    first = min(step for step in steps[0] if step - 1 in validated)
    slider = sorted(set(steps[0]) | set(steps[1]))  # the slider offers both runs' steps
    for step in (slider[-1], first):
        move_slider(chromium, slider.index(step))
        shown = [max((s for s in logged if s <= step), default=min(logged)) for logged in steps]  # each run's own
        wait_for(chromium, " && ".join(f"{panel(i)}.dataset.step === '{shown[i]}' && {panel(i)}.dataset.state === 'maps'"
                                       f" && {panel(i)}.querySelector('.circuits').dataset.step === '{shown[i]}'"
                                       for i in range(2)), f"step {step}")
        for index in range(2):
            assert chromium.evaluate(f"{panel(index)}.querySelector('.source').textContent").endswith(
                f"at step {shown[index]}")
            printed = printed_steps(chromium, index, LABELS)
            assert printed and set(printed) == {shown[index]}, (index, shown[index], printed)
        rows = chromium.evaluate(f"[...{panel(0)}.querySelectorAll('.loss-by-index rect.cell')].map(r => +r.dataset.step)")
        assert rows[0] == validated[0] and validated[0] + 1 in steps[0]  # drawn from the steps Lightning logged
        # the first and last rows, labelled as the tables are paired: logged at n - 1 beside maps of step n
        assert printed_steps(chromium, 0, ROW_STEPS) == [s + 1 if s + 1 in steps[0] else s for s in (rows[0], rows[-1])]
    no_dialogs_or_images(chromium)


def test_scrubbing_keeps_the_chosen_head_and_marks_the_best(chromium, first_hour, fresh_run):
    """While the slider moves, each panel keeps the head it opened on (the best of the step first shown), and a
    clicked head stays enlarged from then on; at each step ★ marks the head the scores route names best there."""
    open_tab_page(chromium, first_hour)
    opened = chromium.evaluate("[...document.querySelectorAll('section.panel .detail-title')].map(t => t.textContent)")
    slider = sorted(set(first_hour.get_json(f"{ROUTE}/maps", run=fresh_run)["steps"]) |
                    set(first_hour.get_json(f"{ROUTE}/maps", run=chromium.evaluate(f"{panel(1)}.dataset.run"))["steps"]))
    for clicked in (False, True):
        if clicked:
            click(chromium, "section.panel button.mini-map[data-layer='0'][data-head='3']")
            opened[0] = "layer 0, head 3"
        for index in (0, len(slider) // 2, len(slider) - 1):
            move_slider(chromium, index)
            wait_for(chromium, f"{panel(0)}.dataset.step === '{slider[index]}' && {panel(0)}.dataset.state === 'maps'"
                               f" && {panel(1)}.dataset.state === 'maps'", f"step {slider[index]}")
            titles = chromium.evaluate("[...document.querySelectorAll('section.panel .detail-title')]"
                                       ".map(t => t.textContent)")
            assert titles == opened, (slider[index], clicked)
            focus = first_hour.get_json(f"{ROUTE}/scores", run=fresh_run, step=str(slider[index]))["focus"]
            best = chromium.evaluate(f"[...{panel(0)}.querySelectorAll('button.mini-map.best')]"
                                     ".map(b => [+b.dataset.layer, +b.dataset.head])")
            assert best == ([[focus["layer"], focus["head"]]] if focus else []), (slider[index], focus)
    no_dialogs_or_images(chromium)


def test_the_vocabulary_is_listed_and_the_example_pair_patches(chromium, first_hour, first_hour_logdir, fresh_run):
    """The sentence box lists the words of the runs' checkpoints (read here from the checkpoint itself), and a
    listed word clicked joins the sentence; the patching box opens filled with the run's probe and a one-word
    change of it whose prediction after the last word differs (checked through the sentence route), and patching
    that pair draws a layers x heads heatmap."""
    import torch

    open_tab_page(chromium, first_hour)
    wait_for(chromium, "document.querySelector('.vocabulary').dataset.state === 'listed'", "the vocabulary")
    vocab = torch.load(first_hour_logdir / "fresh" / "checkpoints" / "last.ckpt", map_location="cpu",
                       weights_only=True)["hyper_parameters"]["vocab"]
    listed = chromium.evaluate("[...document.querySelectorAll('.vocabulary button.vocab-word')].map(b => b.textContent)")
    assert listed == [word for word in vocab if not (word.startswith("<") and word.endswith(">"))] and len(listed) > 5
    assert f"({len(listed)})" in chromium.evaluate("document.querySelector('.vocabulary-title').textContent")
    click(chromium, f".vocabulary button.vocab-word:nth-of-type({len(listed)})")
    assert chromium.evaluate("document.querySelector('input.sentence-input').value") == listed[-1]

    click(chromium, "section.panel details.circuits > summary")
    wait_for(chromium, f"{panel(0)}.querySelector('.pair-form').dataset.state === 'ready'", "the example pair")
    clean, corrupted = chromium.evaluate(f"[{panel(0)}.querySelector('input.pair-clean').value,"
                                         f" {panel(0)}.querySelector('input.pair-corrupted').value]")
    probe = first_hour.get_json(f"{ROUTE}/maps", run=fresh_run)["key_words"]
    assert clean.split() == probe
    assert len(corrupted.split()) == len(probe) and sum(a != b for a, b in zip(clean.split(), corrupted.split(), strict=True)) == 1
    predicted = [first_hour.get_json(f"{ROUTE}/sentence", run=fresh_run, text=text)["predictions"][-1]
                 for text in (clean, corrupted)]
    assert predicted[0] != predicted[1]
    assert f"from “{predicted[0]}” to “{predicted[1]}”" in chromium.evaluate(
        f"{panel(0)}.querySelector('.pair-example').textContent")
    click(chromium, "section.panel button.pair-run")
    wait_for(chromium, f"{panel(0)}.querySelector('[data-view=pair]').dataset.state === 'patched'", "the heatmap")
    cells = chromium.evaluate(f"[...{panel(0)}.querySelectorAll('table[data-view=pair-patching] tbody tr')]"
                              ".map(tr => [...tr.querySelectorAll('td')].map(td => td.dataset.value))")
    assert len(cells) == 2 and all(len(row) == 5 and all(value != "" for value in row) for row in cells), cells
    assert f"clean → “{predicted[0]}”, corrupted → “{predicted[1]}”" in chromium.evaluate(
        f"{panel(0)}.querySelector('.pair-summary').textContent")
    no_dialogs_or_images(chromium)


def test_hover_text_follows_a_new_sentence(chromium, first_hour, fresh_run):
    """The cursor rests on the last cell of the enlarged map while a shorter sentence is sent with Enter: its map
    no longer reaches the cursor, so the line under the maps goes back to the hint instead of keeping the probe's
    words (no mouseleave comes from a map taken out of the page)."""
    # tall enough to show the whole panel unscrolled: a page that shrinks under a scrolled view would scroll it
    chromium.send("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": 2000, "deviceScaleFactor": 1,
                                                         "mobile": False})
    try:
        open_tab_page(chromium, first_hour)
        probe_words = first_hour.get_json(f"{ROUTE}/maps", run=fresh_run)["key_words"]
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
        chromium.send("Emulation.setDeviceMetricsOverride", {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1,
                                                             "mobile": False})
    no_dialogs_or_images(chromium)
