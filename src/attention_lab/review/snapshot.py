"""What ``scripts/snapshot.py`` does: a run's attention records in, one self-contained HTML page out, which shows
them with the attention tab's own modules (every logged step on the slider, every head's map, the enlarged head
and its head view, the score tables, the export links) with no server and no network.

The records are read as the tab reads them: TensorBoard's event multiplexer and data provider under the tab's
:class:`~attention_lab.tensorboard_plugin.run_data.Source`, which checks the sizes the event files declare before
any array is built. The run dir is data: the page is written into ``<run>/visualize/`` (refused when that links
elsewhere) or to ``--out``, as a new file, never through a link.
"""

from __future__ import annotations

import html
import json
import re
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath

from attention_lab.files import MULTIRUN_RECORD
from attention_lab.review.bundle import BundleError, bundle
from attention_lab.review.cli import ReviewError, output_dir, written_text
from attention_lab.run.resume import escaping_link

# Numbers (weights of every step) a snapshot holds: some 30 MB of page, far above a lab run's (a default run logs
# a few dozen steps of 2 layers x 4 heads x 8 x 8 words) and still a page a browser opens.
MAX_SNAPSHOT_WEIGHTS = 1 << 22
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


def read_runs(run_dir: Path) -> list[dict]:
    """Every TensorBoard run under ``<run_dir>/tensorboard`` that holds the probe's maps: its words, its maps at
    every logged step and, for each step, the answers of the scores route (grids, focus, redundancy) and of the
    circuits route (composition, copying, patching; the loss by index once)."""
    from tensorboard import context
    from tensorboard.backend.event_processing import (
        data_provider,
        io_wrapper,
        plugin_event_accumulator,
        plugin_event_multiplexer,
    )
    from tensorboard.plugins.scalar import metadata as scalar_metadata

    from attention_lab.tensorboard_plugin.circuit_views import circuit_views
    from attention_lab.tensorboard_plugin.declared import DeclaredSizes
    from attention_lab.tensorboard_plugin.focus import annotate, task_kind
    from attention_lab.tensorboard_plugin.run_data import NoMaps, Source
    from attention_lab.tensorboard_plugin.run_names import run_label
    from attention_lab.tensorboard_plugin.scores import grids_at
    from attention_lab.tensorboard_plugin.summary import PLUGIN_NAME

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
                          "or without callbacks.attention_summaries")
    runs = []
    for name in names:
        try:
            content, points = source.probe_points(name)
            weights = sum(point.numpy.size for point in points)
            if weights > MAX_SNAPSHOT_WEIGHTS:
                raise ReviewError(f"the run logged {weights} attention weights over {len(points)} steps, more than the "
                                  f"{MAX_SNAPSHOT_WEIGHTS} a snapshot holds: open it in TensorBoard's attention tab")
            maps = [source.page_maps(name, content, points, point) for point in points]
        except NoMaps as err:
            raise ReviewError(f"run {name}: {err.reason}") from None
        series, kind = source.score_series(name), task_kind(str(root), name)
        # the circuits route's logged views at each step; its loss-by-index heatmap covers every step: kept once
        circuits = {str(m["step"]): circuit_views(source, name, m["step"]) for m in maps}
        loss_by_index = [views.pop("loss_by_index") for views in circuits.values()][-1]
        runs.append({"run": name, "label": run_label(name), "query_words": maps[0]["query_words"],
                     "key_words": maps[0]["key_words"], "query_axis": maps[0]["query_axis"],
                     "maps": [{"step": m["step"], "weights": m["weights"], "scale": m["scale"]} for m in maps],
                     "scores": {str(m["step"]): annotate([grid.to_json() for grid in grids_at(series, m["step"])],
                                                         m["step"], kind) for m in maps},
                     "circuits": circuits, "loss_by_index": loss_by_index})
    return runs


def render_snapshot(title: str, runs: list[dict]) -> str:
    """The page: the data, the tab's style and modules, all inline."""
    steps = sorted({m["step"] for run in runs for m in run["maps"]})
    note = (f"Written by scripts/snapshot.py on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC: the attention of "
            f"the probe sentence at each of the {len(steps)} logged steps ({steps[0]} to {steps[-1]}), with the head "
            "scores and circuits logged at or before each. Everything is in this file: it needs no TensorBoard and no network. "
            "Under every map and table: SVG · PNG · CSV.")
    data = {"title": title, "note": note, "runs": runs}
    values = {"TITLE": html.escape(title), "STYLE": tab_style(), "DATA": json_for_script(data),
              "MODULES": tab_modules()}
    return re.sub(r"__(TITLE|STYLE|DATA|MODULES)__", lambda m: values[m.group(1)], TEMPLATE)


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
    written_text(path, render_snapshot(title, runs))
    return {"path": path, "runs": [(r["label"], [m["step"] for m in r["maps"]]) for r in runs]}
