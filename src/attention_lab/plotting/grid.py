"""The picture of a run's attention maps (``visualize.py``'s PNG, and its TensorBoard figure): a grid of heatmaps,
rows = layers, columns = heads, the words on both axes of every panel, one shared colorbar, and a title of
paragraphs wrapped to the figure's width. The PNG holds 256 colours and its layout in its metadata. Drawn from plain
maps (:class:`MapGrid`); which sentence and run are the review's (:mod:`attention_lab.review.grid`)."""

from __future__ import annotations

import json
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.cm import ScalarMappable
from matplotlib.colors import Normalize
from matplotlib.figure import Figure

from attention_lab.plotting.colour_scale import ColourScale
from attention_lab.plotting.heatmaps import draw_heatmap

DPI = 100


@dataclass(frozen=True)
class MapGrid:
    """The maps of one sentence through every layer and head."""

    weights: list[Any]  # one (heads, queries, keys) array per layer
    query_words: list[str]  # down every panel
    key_words: list[str]  # across every panel
    layer_labels: list[str]  # "layer 0", "layer 0 (mamba2)": each row's panels are titled "<label> · head <h>"
    query_axis: str  # the y label of the first column
    scale: ColourScale
    title: list[str]  # paragraphs, each wrapped to the figure's width
    text: str = ""  # the sentence, the PNG's "Title"

    @property
    def layers(self) -> int:
        return len(self.weights)

    @property
    def heads(self) -> int:
        return int(self.weights[0].shape[0]) if self.weights else 0


def grid_figsize(layers: int, heads: int, n_queries: int, n_keys: int, title_lines: int = 2) -> tuple[float, float]:
    """Inches of the grid figure: square-ish panels sized for their words, a colorbar, the title."""
    panel = 1.6 + 0.42 * max(n_queries, n_keys, 3)
    return round(max(heads * panel + 1.3, 6.5), 2), round(layers * panel + 0.5 + 0.25 * title_lines, 2)


def wrapped_title(paragraphs: list[str], width_in: float) -> list[str]:
    """The title's lines: each paragraph wrapped to the figure's width (about 11 characters an inch); an empty
    paragraph has none."""
    width = max(40, int(width_in * 11))
    return [line for paragraph in paragraphs if paragraph for line in textwrap.wrap(paragraph, width)]


def grid_figure(grid: MapGrid) -> Figure:
    """Rows = layers, columns = heads; words on both axes of every panel; one shared colorbar."""
    scale = grid.scale
    rows, cols = grid.layers, grid.heads
    n_q, n_k = len(grid.query_words), len(grid.key_words)
    title = wrapped_title(grid.title, grid_figsize(rows, cols, n_q, n_k)[0])
    fig = Figure(figsize=grid_figsize(rows, cols, n_q, n_k, len(title)), dpi=DPI, layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for layer in range(rows):
        for head in range(cols):
            ax = axes[layer][head]
            draw_heatmap(ax, grid.weights[layer][head], grid.query_words, grid.key_words,
                         f"{grid.layer_labels[layer]} · head {head}", scale=scale)
            ax.set_xlabel("key (attended to)" if layer == rows - 1 else "")
            ax.set_ylabel(grid.query_axis if head == 0 else "")
    fig.colorbar(ScalarMappable(Normalize(scale.vmin, scale.vmax), cmap=scale.cmap), ax=axes,
                 shrink=min(1.0, 0.9 / rows ** 0.5), label=scale.label)
    fig.suptitle("\n".join(title), fontsize=11)
    return fig


def save_grid_png(grid: MapGrid, path: Path) -> Path:
    """The grid as a 256-colour PNG (a third of the RGBA size, same look), its layout in the metadata."""
    from PIL import Image, PngImagePlugin

    canvas = FigureCanvasAgg(grid_figure(grid))
    canvas.draw()
    image = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba()).convert("RGB")
    info = PngImagePlugin.PngInfo()
    layout = {"layers": grid.layers, "heads": grid.heads, "query_words": grid.query_words,
              "key_words": grid.key_words, "title": canvas.figure.get_suptitle().splitlines(),
              "colour_scale": grid.scale.as_dict()}
    info.add_text("Title", grid.text)
    info.add_text("Description", json.dumps(layout))
    info.add_text("Software", "attention-lab scripts/visualize.py")
    image.quantize(256, method=Image.Quantize.MEDIANCUT).save(path, pnginfo=info, optimize=True)
    return path
