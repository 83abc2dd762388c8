#!/usr/bin/env python
"""The attention tab's first screen as a PNG: what a user sees on opening it, for the docs.

    python scripts/screenshot_tab.py                          # trains the default experiment first (about a minute)
    python scripts/screenshot_tab.py outputs/runs/<date>/<time>   # a run dir (or a sweep, or outputs/): trains nothing
    python scripts/screenshot_tab.py <logdir> --out tab.png --size 1280x800

Starts TensorBoard on the logdir as scripts/start_tensorboard.py does (every logged step kept), opens
TensorBoard's page on the attention tab (#attention_lab) in headless Chromium at --size (default 1280x800, the
window the docs promise the enlarged map and the slider fit in), waits until every panel has drawn its maps and the
sentence box lists its words, and writes the whole window, TensorBoard's bar included, to --out (default
docs/images/tensorboard_tab.png, the README's picture). Without a logdir it trains `python scripts/train.py` (the
default experiment, as `make train` does) into a temporary folder first: `python scripts/screenshot_tab.py` alone
redraws the README's picture. Needs Chromium (Debian: apt-get install chromium; or CHROMIUM=<path>).
"""

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "images" / "tensorboard_tab.png"
SIZE = (1280, 800)
STARTUP_S = 180  # TensorBoard's imports and first scan of the logdir; a page's drawing, on a busy machine
QUIET_TRAINING = ["trainer.enable_progress_bar=false", "~callbacks.progress_bar"]
# The tab's document inside TensorBoard's page: its frame sits in shadow roots. Null until the tab says it is ready
# and no panel, view or list is still loading.
TAB_SETTLED = """(() => { const stack = [document];
    while (stack.length) { const root = stack.pop();
      for (const el of root.querySelectorAll('*')) {
        if (el.tagName === 'IFRAME' && el.contentDocument && el.contentDocument.body) {
          const tab = el.contentDocument;
          if (tab.body.dataset.ready === 'true' && !tab.querySelector('[data-state=loading]')
              && tab.querySelectorAll('section.panel').length) return true; }
        if (el.shadowRoot) stack.push(el.shadowRoot); } }
    return null; })()"""


class ScreenshotError(Exception):
    """Why no screenshot was written (``reason``: the one line printed)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def size_argument(text: str) -> tuple[int, int]:
    width, _, height = text.partition("x")
    if not (width.isascii() and width.isdigit() and height.isascii() and height.isdigit()) or \
            not (320 <= int(width) <= 4096 and 240 <= int(height) <= 4096):
        raise argparse.ArgumentTypeError(f"--size={text} is invalid: write WIDTHxHEIGHT in pixels, each 320..4096 "
                                         "wide and 240..4096 high, e.g. 1280x800")
    return int(width), int(height)


def train_default(folder: Path) -> Path:
    """The default experiment trained into ``folder / "default"`` (as `make train` runs it); that run dir."""
    run_dir = folder / "default"
    print(f"training the default experiment into {run_dir} ...", file=sys.stderr, flush=True)
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "train.py"), *QUIET_TRAINING,
                           f"hydra.run.dir={run_dir}"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise ScreenshotError(f"training the default experiment failed (exit {done.returncode}): "
                              f"{(done.stderr.strip().splitlines() or ['no output'])[-1]}")
    return run_dir


def served_port(pid: int) -> int | None:
    """The port TensorBoard process ``pid`` serves on, once it does (its info file, written after binding)."""
    from tensorboard import manager

    return next((info.port for info in manager.get_all() if info.pid == pid), None)


def runs_listed(base_url: str) -> bool:
    """Whether the tab lists a run with maps yet (TensorBoard's first scan of the logdir may lag its server)."""
    try:
        with urllib.request.urlopen(f"{base_url}/data/plugin/attention_lab/runs", timeout=10) as reply:
            return any(run["has_maps"] for run in json.loads(reply.read())["runs"])
    except (urllib.error.URLError, ConnectionError, TimeoutError, ValueError, KeyError):
        return False


def start_tensorboard(logdir: Path, log_path: Path) -> tuple[subprocess.Popen, str]:
    """TensorBoard on ``logdir`` (as scripts/start_tensorboard.py starts it, on a free port of 127.0.0.1), once its
    tab lists a run with maps: (the process, its address)."""
    with log_path.open("w") as log:
        proc = subprocess.Popen([sys.executable, str(ROOT / "scripts" / "start_tensorboard.py"), str(logdir),
                                 "--host", "127.0.0.1", "--port", "0"], stdout=log, stderr=subprocess.STDOUT)
    deadline, base_url = time.monotonic() + STARTUP_S, None
    while base_url is None or not runs_listed(base_url):
        if proc.poll() is not None:
            raise ScreenshotError(f"TensorBoard exited {proc.returncode}: "
                                  f"{(log_path.read_text().strip().splitlines() or ['no output'])[-1]}")
        if time.monotonic() > deadline:
            stop(proc)
            raise ScreenshotError(f"TensorBoard listed no run with attention maps under {logdir} within {STARTUP_S} s")
        if base_url is None and (port := served_port(proc.pid)) is not None:
            base_url = f"http://127.0.0.1:{port}"
        time.sleep(0.5)
    return proc, base_url


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def screenshot(logdir: Path, out: Path, size: tuple[int, int], scratch: Path) -> None:
    from attention_lab.tensorboard_plugin.headless_chromium import Chromium, find_chromium, wait_for

    executable = find_chromium()
    if executable is None:
        raise ScreenshotError("Chromium not found: install it (Debian: apt-get install chromium) or set CHROMIUM=<path>")
    proc, base_url = start_tensorboard(logdir, scratch / "tensorboard.log")
    try:
        browser = Chromium(executable, scratch / "chromium-profile", width=size[0], height=size[1])
        try:
            browser.navigate(f"{base_url}/#attention_lab")
            wait_for(browser, TAB_SETTLED, "attention tab drawn", STARTUP_S)
            png = browser.screenshot()
        finally:
            browser.close()
    finally:
        stop(proc)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(png)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="screenshot_tab.py", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("logdir", nargs="?", help="a run dir, a sweep dir or outputs/ (default: train the default "
                                                  "experiment into a temporary folder)")
    parser.add_argument("--out", type=Path, default=OUT, help=f"the PNG to write (default: {OUT.relative_to(ROOT)})")
    parser.add_argument("--size", type=size_argument, default=SIZE, metavar="WIDTHxHEIGHT",
                        help="the browser window (default: 1280x800)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.logdir is not None and not Path(args.logdir).is_dir():
        print(f"error: logdir={args.logdir} is not a directory: give a run dir, a sweep dir or outputs/",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="screenshot_tab-") as scratch:
        try:
            logdir = Path(args.logdir) if args.logdir else train_default(Path(scratch))
            screenshot(logdir.resolve(), args.out, args.size, Path(scratch))
        except (ScreenshotError, TimeoutError) as err:
            print(f"error: {getattr(err, 'reason', err)}", file=sys.stderr)
            return 1
    print(f"wrote {args.out} ({args.size[0]}x{args.size[1]}) of the attention tab on {logdir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
