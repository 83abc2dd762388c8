"""What ``scripts/snapshot.py`` does: a run's attention records in, one self-contained HTML page out, which shows
them with the attention tab's own modules (every logged step on the slider, every head's map, the enlarged head
and its head view, the score tables, the export links) with no server and no network.

The records are read as the tab reads them: TensorBoard's event multiplexer and data provider under the tab's
:class:`~attention_lab.tensorboard_plugin.run_data.Source`, which checks the sizes the event files declare before
any array is built. The run dir is data: the page is written into ``<run>/visualize/`` (refused when that links
elsewhere) or to ``--out``, as a new file, never through a link.

What it embeds is bounded before it is built: the weights the probe records declare (MAX_SNAPSHOT_WEIGHTS, from
the event files, before the arrays), each step's scores and circuits as one answer of the tab
(:data:`~attention_lab.tensorboard_plugin.limits.MAX_ANSWER_CELLS`), and the bytes of everything together
(MAX_SNAPSHOT_BYTES): each step's part is written as JSON as soon as it is read and counted, and the page is
written from those parts, part by part.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import chain
from pathlib import Path, PurePosixPath

from attention_lab.errors import ReviewError
from attention_lab.records.files import MULTIRUN_RECORD, escaping_link
from attention_lab.review.cli import output_dir, written
from attention_lab.tensorboard_plugin.bundle import BundleError, bundle

# Numbers (weights of every step) a snapshot holds: some 30 MB of page, far above a lab run's (a default run logs
# a few dozen steps of 2 layers x 4 heads x 8 x 8 words) and still a page a browser opens.
MAX_SNAPSHOT_WEIGHTS = 1 << 22
# Bytes of records a snapshot embeds (every step's maps, scores and circuits, as JSON): twice what the most weights
# take as JSON, and far above a lab run's (a default run's whole page is some 229 KB). A run dir that logs wide
# grids at many steps reaches it after a few steps' parts, before any page is built.
MAX_SNAPSHOT_BYTES = 1 << 26
ENTRY = "snapshot.js"

TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy"
      content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src blob: data:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Attention snapshot · __TITLE__</title>
<style>
__STYLE__
.snapshot-title { font-size: 16px; margin: 0 0 4px; overflow-wrap: anywhere; }
</style>
</head>
<body>
<script id="snapshot-data" type="application/json">__DATA__</script>
<script type="module">
__MODULES__
module_snapshot.renderSnapshot(JSON.parse(document.getElementById("snapshot-data").textContent));
</script>
</body>
</html>
"""


def json_for_script(value) -> str:
    """JSON that cannot close the <script> element it sits in (a probe's ``<unk>`` contains '<')."""
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def tab_modules() -> str:
    """The snapshot's entry module and every tab module it imports, as one inline script."""
    from attention_lab.tensorboard_plugin.plugin import PAGE_FILES, STATIC

    files = {route.lstrip("/"): path for route, path in PAGE_FILES.items() if route.endswith(".js")}
    try:
        return bundle(ENTRY, {**files, ENTRY: STATIC / ENTRY})
    except BundleError as err:
        raise ReviewError(f"the attention tab's modules cannot be bundled: {err}") from None


def tab_style() -> str:
    from attention_lab.tensorboard_plugin.plugin import PAGE_FILES

    style = PAGE_FILES["/style.css"].read_text(encoding="utf-8")
    if "</style" in style.lower():
        raise ReviewError("the attention tab's style.css contains '</style', which cannot be written inline")
    return style


def check_run_dir(path: Path) -> Path:
    """The run dir, resolved, when it holds TensorBoard records; ReviewError with one line otherwise."""
    if not path.exists():
        raise ReviewError(f"the run dir {path} does not exist: pass a run directory such as outputs/runs/<date>/<time>")
    if not path.is_dir():
        raise ReviewError(f"{path} is a file: pass a run directory such as outputs/runs/<date>/<time>")
    if not (path / "tensorboard").is_dir():
        if (path / MULTIRUN_RECORD).is_file():
            raise ReviewError(f"the run dir {path} is a sweep directory: pass one of its job directories")
        raise ReviewError(f"{path} has no tensorboard/ folder: pass a run directory written by scripts/train.py")
    return path.resolve()


@dataclass
class Embedded:
    """A part of the page's data, already written as JSON for the page's script element."""

    text: str


@dataclass
class PageBudget:
    """The bytes of records the page embeds so far: each part is written as JSON when it is read and counted, and
    the snapshot is refused (one line naming MAX_SNAPSHOT_BYTES) as soon as the parts pass the bound."""

    run_dir: Path
    limit: int = MAX_SNAPSHOT_BYTES
    used: int = 0

    def embed(self, value, what: str) -> Embedded:
        text = json_for_script(value)
        self.used += len(text) if text.isascii() else len(text.encode("utf-8"))
        if self.used > self.limit:
            raise ReviewError(f"the snapshot of {self.run_dir} would embed more than {self.limit} bytes of records, "
                              f"the most a snapshot holds ({self.used} with {what}): open the run in TensorBoard's "
                              "attention tab")
        return Embedded(text)


def json_parts(value) -> Iterator[str]:
    """The JSON of ``value``, in parts, with each Embedded part as it was written (json_for_script's escaping)."""
    if isinstance(value, Embedded):
        yield value.text
    elif isinstance(value, dict):
        yield "{"
        for n, (key, item) in enumerate(value.items()):
            yield f"{', ' if n else ''}{json_for_script(str(key))}: "
            yield from json_parts(item)
        yield "}"
    elif isinstance(value, list):
        yield "["
        for n, item in enumerate(value):
            yield ", " if n else ""
            yield from json_parts(item)
        yield "]"
    else:
        yield json_for_script(value)


def read_runs(run_dir: Path) -> list[dict]:
    """Every TensorBoard run under ``<run_dir>/tensorboard`` that holds the probe's maps: its words, its maps at
    every logged step and, for each step, the answers of the scores route (grids, focus, redundancy) and of the
    circuits route (composition, copying, patching; the loss by index once). Each step's parts are written as JSON
    as they are read (:class:`PageBudget`)."""
    from tensorboard import context
    from tensorboard.backend.event_processing import (
        data_provider,
        io_wrapper,
        plugin_event_accumulator,
        plugin_event_multiplexer,
    )
    from tensorboard.plugins.scalar import metadata as scalar_metadata

    from attention_lab.records.run_names import PLUGIN_NAME
    from attention_lab.tensorboard_plugin.declared import DeclaredSizes
    from attention_lab.tensorboard_plugin.run_data import Source

    # Runs are named as under `tensorboard --logdir outputs`, from the date folder down (<date>/<time>/tensorboard/..)
    root = run_dir.parents[1] if len(run_dir.parts) > 2 else run_dir.parent
    # every step of the tab's records; one of any other tag (images, histograms) is all the multiplexer keeps
    multiplexer = plugin_event_multiplexer.EventMultiplexer(
        size_guidance={plugin_event_accumulator.TENSORS: 1},
        tensor_size_guidance={PLUGIN_NAME: 0, scalar_metadata.PLUGIN_NAME: 0})
    for folder in sorted(io_wrapper.GetLogdirSubdirectories(str(run_dir / "tensorboard"))):
        multiplexer.AddRun(folder, name=PurePosixPath(Path(folder).relative_to(root)).as_posix())
    multiplexer.Reload()
    source = Source(data_provider.MultiplexerDataProvider(multiplexer, str(root)), context.RequestContext(), "",
                    DeclaredSizes(str(root)))
    names = [entry["run"] for entry in source.runs() if entry["has_maps"]]
    if not names:
        raise ReviewError(f"{run_dir} holds no attention records: it was trained before the attention tab existed, "
                          "or without callbacks.attention_maps")
    budget = PageBudget(run_dir, MAX_SNAPSHOT_BYTES)
    return [read_run(source, name, budget) for name in names]


def read_run(source, name: str, budget: PageBudget) -> dict:
    """One run's part of the page (see :func:`read_runs`), with its logged ``steps`` and the steps it clamped heads
    at. Raises ReviewError."""
    from attention_lab.records.run_names import run_label
    from attention_lab.tensorboard_plugin.circuit_views import circuit_series, logged_views, loss_by_index
    from attention_lab.tensorboard_plugin.focus import annotate
    from attention_lab.tensorboard_plugin.run_data import CellBudget, NoMaps, point_maps
    from attention_lab.tensorboard_plugin.scores import grids_at

    try:
        records, weights = source.probe_weights(name)
        if weights > MAX_SNAPSHOT_WEIGHTS:
            raise ReviewError(f"the run logged {weights} attention weights over {records} steps, more than the "
                              f"{MAX_SNAPSHOT_WEIGHTS} a snapshot holds: open it in TensorBoard's attention tab")
        content, points = source.probe_points(name)
        maps, steps, words = [], [], {}
        for point in points:
            shown = point_maps(content, point)
            words = words or {key: shown[key] for key in ("query_words", "key_words", "query_axis")}
            steps.append(shown["step"])
            maps.append(budget.embed({key: shown[key] for key in ("step", "weights", "scale")},
                                     f"the maps of run {name} at step {point.step}"))
        series, kind = source.score_series(name), source.task_kind(name)
        circuits, sizes = circuit_series(source, name)
        scores, views = {}, {}
        for step in dict.fromkeys(steps):
            grids = grids_at(series, step, CellBudget(f"this run's scores at step {step}", sizes).take)
            scores[str(step)] = budget.embed(annotate([grid.to_json() for grid in grids], step, kind),
                                             f"the scores of run {name} at step {step}")
            logged = logged_views(circuits, step, CellBudget(f"this run's circuits at step {step}", sizes), sizes)
            views[str(step)] = budget.embed({"run": name, **logged}, f"the circuits of run {name} at step {step}")
        heatmap = loss_by_index(circuits, CellBudget("this run's loss by index", sizes))
        clamp = source.clamp(name)
    except NoMaps as err:
        raise ReviewError(f"run {name}: {err.reason}") from None
    return {"run": name, "label": run_label(name), **words, "maps": maps, "steps": steps,
            "scores": scores, "circuits": views, "clamp": clamp,
            "loss_by_index": budget.embed(heatmap, f"the loss by index of run {name}")}


def page_parts(title: str, runs: list[dict]) -> Iterator[str]:
    """The page, in parts: the data, the tab's style and modules, all inline (the style and modules read, and
    checked, before the first part)."""
    steps = sorted({step for run in runs for step in run["steps"]})
    note = (f"Written by scripts/snapshot.py on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC: the attention of "
            f"the probe sentence at each of the {len(steps)} logged steps ({steps[0]} to {steps[-1]}), with the head "
            "scores and circuits logged at or before each. Everything is in this file: it needs no TensorBoard and no network. "
            "Under every map and table: SVG · PNG · CSV.")
    values = {"TITLE": [html.escape(title)], "STYLE": [tab_style()],
              "DATA": json_parts({"title": title, "note": note,
                                  "runs": [{key: value for key, value in run.items() if key != "steps"} for run in runs]}),
              "MODULES": [tab_modules()]}
    return chain.from_iterable(values[text] if n % 2 else [text]
                               for n, text in enumerate(re.split(r"__(TITLE|STYLE|DATA|MODULES)__", TEMPLATE)))


def write_parts(path: Path, parts: Iterator[str]) -> None:
    with path.open("w", encoding="utf-8") as handle:
        for part in parts:
            handle.write(part)


def unique_path(folder: Path) -> Path:
    """``snapshot-<timestamp>.html`` in ``folder``, with -2, -3... when taken: never overwrites."""
    base = f"snapshot-{datetime.now():%Y%m%d-%H%M%S}"
    path, n = folder / f"{base}.html", 1
    while path.exists() or path.is_symlink():
        n += 1
        path = folder / f"{base}-{n}.html"
    return path


def output_path(run_dir: Path, out: str | None) -> Path:
    """Where the page goes (checked before anything is read): ``<run>/visualize/snapshot-<time>.html``, ``--out``
    itself (a file ending in .html), or a new name inside ``--out`` (an existing directory)."""
    if out is None:
        default = run_dir / "visualize"
        found = escaping_link(run_dir, only=default.name)
        if found is not None:
            path, what = found
            raise ReviewError(f"the default output directory {default} (no --out given) is invalid: the run's {path} "
                              f"is {what}, and snapshot.py writes only into the run dir, without following it (remove "
                              "the link, or pass --out FILE.html)")
        return unique_path(output_dir(None, default=default))
    path = Path(out).expanduser()
    if path.is_dir():
        return unique_path(output_dir(out, default=path))
    if path.suffix.lower() not in (".html", ".htm"):
        raise ReviewError(f"--out={out} is invalid: give a file ending in .html, or an existing directory")
    output_dir(str(path.parent), default=path.parent)
    return path


def snapshot(run: str | Path, out: str | None = None) -> dict:
    """Writes the page; returns its path, the runs and their steps."""
    run_dir = check_run_dir(Path(run).expanduser())
    path = output_path(run_dir, out)
    runs = read_runs(run_dir)
    title = "/".join(run_dir.parts[-2:])
    parts = page_parts(title, runs)
    written(path, lambda tmp: write_parts(tmp, parts))
    return {"path": path, "runs": [(run["label"], run["steps"]) for run in runs]}
