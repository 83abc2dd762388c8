"""scripts/snapshot.py without a browser: the page holds every logged step's weights and the scores of each step as
the tab reads them, everything inline; the tab's modules are bundled once each; bad run dirs, a linked visualize/
and a wrong --out are refused in one line. The page in Chromium: tests/browser/test_export_browser.py."""

from __future__ import annotations

import html
import importlib.util
import json
import logging
import os
import re

import numpy as np
import pytest

from attention_lab.errors import ReviewError
from attention_lab.tensorboard_plugin.bundle import BundleError, bundle
from attention_lab.tensorboard_plugin.snapshot import snapshot
from conftest import ROOT, run_script
from tab_runs import XSS, write_run

SCRIPT = ROOT / "scripts" / "snapshot.py"
WORDS = ["Life", XSS, 'a,"b', "=cmd"]
# Lightning logs the validation after n steps at n - 1: the tab shows those scores with the maps of step n
# (values exact in float32, as scalars are stored)
SCALARS = {"head_score/previous_token/layer0/head0": [(9, 0.5), (19, 0.75)],
           "head_score/previous_token/layer1/head2": [(9, 0.125), (19, 0.875)],
           "ablation/zero/loss/layer0/all": [(19, 0.25)], "patching/logit_diff/layer1/head1": [(19, 0.5)],
           "val/loss_by_index/0": [(9, 2.0), (19, 1.5)], "val/loss_by_index/1": [(9, 1.0), (19, 0.25)]}


def script_main():
    spec = importlib.util.spec_from_file_location("snapshot_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main


@pytest.fixture
def run_dir(tmp_path):
    path = tmp_path / "runs" / "2026-11-26" / "10-00-00"
    weights = write_run(path, steps=[0, 10, 20], words=WORDS, scalars=SCALARS)
    return path, weights


def page_data(page: str) -> dict:
    found = re.search(r'<script id="snapshot-data" type="application/json">(.*?)</script>', page, re.DOTALL)
    return json.loads(found.group(1))


def test_the_page_holds_every_logged_step_and_its_scores(run_dir):
    path, written = run_dir
    result = snapshot(path)
    assert result["path"].parent == path / "visualize" and result["path"].name.startswith("snapshot-")
    page = result["path"].read_text(encoding="utf-8")
    [run] = page_data(page)["runs"]
    assert run["run"] == "2026-11-26/10-00-00/tensorboard/version_0" and run["label"] == "version_0 · 2026-11-26/10-00-00"
    assert run["query_words"] == run["key_words"] == WORDS
    assert [m["step"] for m in run["maps"]] == [0, 10, 20]
    for shown in run["maps"]:  # stored as float16, sent rounded to 4 places
        expected = written[shown["step"]].astype(np.float16).astype(np.float64).round(4)
        np.testing.assert_allclose(np.array(shown["weights"]), expected, atol=1e-9)
    cells = {step: {g["family"]: g["cells"] for g in reply["grids"]} for step, reply in run["scores"].items()}
    assert cells["0"] == {}  # nothing validated yet at step 0
    assert cells["10"]["head_score/previous_token"] == [[0.5, None, None], [None, None, 0.125]]
    assert cells["20"]["head_score/previous_token"] == [[0.75, None, None], [None, None, 0.875]]
    assert [g["whole_layer"] for g in run["scores"]["20"]["grids"] if g["family"] == "ablation/zero/loss"] == [[0.25]]
    # the circuits route's logged views at each step, the loss by index once for every step
    assert run["circuits"]["10"]["patching"] is None
    assert run["circuits"]["20"]["patching"]["cells"] == [[None, None], [None, 0.5]]  # as many heads as logged
    assert run["loss_by_index"]["steps"] == [9, 19] and run["loss_by_index"]["values"] == [[2.0, 1.0], [1.5, 0.25]]
    # everything inline, and the probe's words only as data
    for external in ("<link", " src=\"", "@import", "url(", "https://", "fetch("):
        assert external not in page
    assert XSS not in page and html.escape(XSS) not in page


def test_a_run_beyond_what_a_snapshot_holds_is_refused(run_dir, monkeypatch):
    import attention_lab.tensorboard_plugin.snapshot as module

    path, written = run_dir
    monkeypatch.setattr(module, "MAX_SNAPSHOT_WEIGHTS", sum(w.size for w in written.values()) - 1)
    with pytest.raises(ReviewError, match=f"the run logged {sum(w.size for w in written.values())} attention weights "
                                          "over 3 steps, more than the"):
        snapshot(path, out=str(path / "page.html"))
    assert not (path / "page.html").exists()


def test_each_module_is_bundled_once_after_what_it_imports(tmp_path):
    from attention_lab.tensorboard_plugin.snapshot import tab_modules

    code = tab_modules()
    names = re.findall(r"^// (\S+\.js)$", code, re.MULTILINE)
    assert len(names) == len(set(names)) and names[-1] == "snapshot.js"
    for module in ("head_view.js", "heatmaps.js", "export.js", "panel.js", "controls.js"):
        assert module in names
    assert names.index("head_view.js") < names.index("heatmaps.js") < names.index("export.js") < names.index("panel.js")
    assert not re.search(r"^\s*(import|export)\b", code, re.MULTILINE)
    files = {"a.js": tmp_path / "a.js", "b.js": tmp_path / "b.js"}
    files["a.js"].write_text('import { f as g } from "./b.js";\nexport function h() { return g(); }\n')
    files["b.js"].write_text("export const f = () => 2;\n")
    assert "const { f: g } = module_b;" in bundle("a.js", files)
    files["b.js"].write_text("export default 2;\n")
    with pytest.raises(BundleError, match="b.js: 'export default 2;'"):
        bundle("a.js", files)
    files["b.js"].write_text('import { h } from "./a.js";\nexport const f = () => h;\n')
    with pytest.raises(BundleError, match="a.js -> b.js -> a.js"):
        bundle("a.js", files)
    with pytest.raises(BundleError, match="imports ./c.js"):
        bundle("c.js", files)


def test_out_is_a_file_or_a_directory_and_the_default_never_overwrites(run_dir, tmp_path):
    path, _ = run_dir
    first, second = snapshot(path)["path"], snapshot(path)["path"]
    assert first != second and first.is_file() and second.is_file()
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    link = tmp_path / "shared" / "page.html"
    link.parent.mkdir()
    link.symlink_to(target)
    assert snapshot(path, out=str(link))["path"] == link
    assert not link.is_symlink() and target.read_text() == "keep me"  # the link replaced, never written through
    assert snapshot(path, out=str(tmp_path / "shared"))["path"].parent == tmp_path / "shared"
    with pytest.raises(ReviewError, match=r"--out=.*page\.txt is invalid: give a file ending in \.html"):
        snapshot(path, out=str(tmp_path / "page.txt"))


@pytest.mark.parametrize("case", ["missing", "file", "sweep", "no_tensorboard", "no_records", "linked_visualize"])
def test_a_bad_run_dir_fails_with_one_line(tmp_path, case, capsys):
    path = tmp_path / "run"
    expected = {"missing": "does not exist", "file": "is a file", "sweep": "is a sweep directory",
                "no_tensorboard": "has no tensorboard/ folder", "no_records": "holds no attention records",
                "linked_visualize": "visualize is a symlink to the folder"}[case]
    if case == "file":
        path.write_text("x")
    elif case in ("sweep", "no_tensorboard"):
        path.mkdir()
        if case == "sweep":
            (path / "multirun.yaml").write_text("{}")
    elif case == "no_records":
        write_run(path, steps=[], words=[], maps=False)
    elif case == "linked_visualize":
        write_run(path, steps=[0], words=WORDS)
        (tmp_path / "elsewhere").mkdir()
        os.symlink(tmp_path / "elsewhere", path / "visualize")
    assert script_main()([str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and expected in err and err.count("\n") == 1, err
    assert not any((tmp_path / "elsewhere").glob("*")) if case == "linked_visualize" else True


def test_the_next_test_finds_the_attention_lab_logger_as_it_was():
    """The test above runs snapshot.py's main() under capsys: it points the ``attention_lab`` logger at capsys's
    stream, closed after that test (conftest's autouse fixture puts the logger back; without it a later run's log
    lines went to the closed stream: "I/O operation on closed file"). --dist loadscope keeps a module's tests in
    order on one worker."""
    logger = logging.getLogger("attention_lab")
    assert logger.propagate and not logger.handlers, logger.handlers


def test_help_and_errors_come_without_torch(tmp_path):
    proc = run_script(SCRIPT, "--help")
    assert proc.returncode == 0 and "--out FILE.html" in proc.stdout and "no network" in proc.stdout
    code = ("import sys, runpy; sys.argv = sys.argv[1:]\n"
            "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\nexcept SystemExit:\n    pass\n"
            "print('torch imported:', 'torch' in sys.modules)")
    proc = run_script("-c", code, str(SCRIPT), str(tmp_path / "missing"))
    assert "torch imported: False" in proc.stdout and "does not exist" in proc.stderr, proc.stdout + proc.stderr
    proc = run_script(SCRIPT)
    assert proc.returncode == 2 and proc.stderr.startswith("error: a run dir is required")
