"""What ``scripts/visualize.py`` does: a run and a sentence in, the PNG grid, the HTML head view and
(optionally) TensorBoard images out, under a new name that never overwrites earlier outputs."""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from omegaconf.errors import OmegaConfBaseException

from attention_lab.analysis.tags import best_head, score_grid
from attention_lab.data.probe import EXAMPLE_TEXT, task_probe
from attention_lab.data.tasks import task_head_score_kind
from attention_lab.errors import ConfigError, ReviewError
from attention_lab.records.files import METRICS, escaping_link, read_json, tensorboard_dir
from attention_lab.records.trained_run import RunFiles, describe_run, find_run, load_module
from attention_lab.review.attention_maps import AttentionMaps
from attention_lab.review.cli import output_dir, written
from attention_lab.review.grid import grid_figure, save_grid_png
from attention_lab.review.html_view import write_html
from attention_lab.review.maps import compute_maps

log = logging.getLogger(__name__)


def run_probe(config: Mapping[str, Any]) -> str:
    """The probe a run showed: its ``probe``, else (``probe=null``) its task's probe; EXAMPLE_TEXT for a record
    without a task, or whose task's corpus can no longer be read."""
    probe, task = config.get("probe"), config.get("task")
    if isinstance(probe, str):
        return probe
    if probe is not None or not isinstance(task, Mapping):  # a record this lab did not write
        return EXAMPLE_TEXT
    try:
        return task_probe(None, task)
    except (ConfigError, OmegaConfBaseException) as error:
        log.warning("warning: the run's task probe cannot be rebuilt (%s); showing %r instead", error, EXAMPLE_TEXT)
        return EXAMPLE_TEXT


def opening_head(files: RunFiles) -> dict[str, Any] | None:
    """The head the HTML head view opens on, as the attention tab opens: the one scoring highest on the run's task
    kind in its final validation (metrics.json); None for a task without a kind or a run without those scores."""
    kind = task_head_score_kind(files.config.get("task")) if files.config is not None else None
    numbers = {name: value for name, value in read_json(files.run_dir / METRICS).items()
               if isinstance(value, (int, float)) and not isinstance(value, bool)}
    cells = score_grid(numbers, kind) if kind else None
    found = best_head(cells) if cells else None
    if found is None:
        return None
    layer, head = found
    return {"kind": kind, "layer": layer, "head": head, "score": cells[layer][head]}


def slugify(text: str, max_len: int = 40) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()
    return slug[:max_len].rstrip("-") or "text"


def unique_stem(out_dir: Path, text: str, suffixes: tuple[str, ...] = (".png", ".html")) -> str:
    """``<slug of text>-<timestamp>``, with ``-2``, ``-3``... if those files exist: never overwrites."""
    base = f"{slugify(text)}-{datetime.now():%Y%m%d-%H%M%S}"
    stem, n = base, 1
    while any((out_dir / f"{stem}{suffix}").exists() for suffix in suffixes):
        n += 1
        stem = f"{base}-{n}"
    return stem


def add_to_tensorboard(maps: AttentionMaps, log_dir: Path, step: int, tag: str) -> None:
    """The grid and one figure per head, under ``visualize/<tag>/...`` in the run's TensorBoard."""
    from torch.utils.tensorboard import SummaryWriter

    from attention_lab.plotting.heatmaps import attention_figure

    writer = SummaryWriter(log_dir=str(log_dir))
    try:
        writer.add_figure(f"visualize/{tag}/grid", grid_figure(maps), step, close=False)
        for layer, layer_weights in enumerate(maps.weights):
            for head, head_weights in enumerate(layer_weights):
                fig = attention_figure(head_weights, maps.query_words, maps.words, f"{maps.layer_label(layer)}, head {head}")
                writer.add_figure(f"visualize/{tag}/layer{layer}/head{head}", fig, step, close=False)
        writer.add_text(f"visualize/{tag}/text", f"{' '.join(maps.words)} → {' '.join(maps.predictions)}", step)
    finally:
        writer.close()


def refuse_links(run_dir: Path, name: str, setting: str, instead: str) -> None:
    """The run dir is data: a link in its ``name`` (visualize/, tensorboard/) must not lead what visualize.py
    writes out of it. Raises ReviewError before anything is loaded."""
    found = escaping_link(run_dir, only=name)
    if found is not None:
        path, what = found
        raise ReviewError(f"{setting} is invalid: the run's {path} is {what}, and visualize.py writes only into the "
                          f"run dir, without following it (remove the link, or {instead})")


def visualize(run: str | Path, text: str | None = None, *, out: str | Path | None = None,
              tensorboard: bool = False) -> dict[str, Any]:
    """Returns the maps and the paths written. The output directory is checked before the model is loaded."""
    files = find_run(run)
    default = files.run_dir / "visualize"
    if out is None:
        refuse_links(files.run_dir, default.name, f"the default output directory {default} (no --out given)",
                     "pass --out DIR")
    if tensorboard:
        refuse_links(files.run_dir, "tensorboard", "--tensorboard", "leave out --tensorboard")
    out_dir = output_dir(out, default=default)
    if text is None:
        text = run_probe(files.config or {})
        log.info("no --text given: using the run's probe sentence %r", text)
    module, step = load_module(files)
    maps = compute_maps(module, text, description=describe_run(files, module))
    stem = unique_stem(out_dir, text)
    result: dict[str, Any] = {
        "maps": maps, "step": step, "checkpoint": files.checkpoint,
        "png": written(out_dir / f"{stem}.png", lambda tmp: save_grid_png(maps, tmp)),
        "html": write_html(maps, out_dir / f"{stem}.html", opening_head(files))}
    if tensorboard:
        log_dir = tensorboard_dir(files.run_dir)
        add_to_tensorboard(maps, log_dir, step, stem)
        result["tensorboard"] = log_dir
    return result
