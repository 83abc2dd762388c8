"""The PNG of a run's attention maps: rows = layers, columns = heads, words on both axes of every
panel, one shared colorbar, and the layout in the PNG's metadata."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from attention_lab.review.attention_maps import AttentionMaps

DPI = 100


def grid_figsize(layers: int, heads: int, n_queries: int, n_keys: int, title_lines: int = 2) -> tuple[float, float]:
    """Inches of the grid figure: square-ish panels sized for their words, a colorbar, the title."""
    panel = 1.6 + 0.42 * max(n_queries, n_keys, 3)
    return round(max(heads * panel + 1.3, 6.5), 2), round(layers * panel + 0.5 + 0.25 * title_lines, 2)


def grid_title(maps: AttentionMaps, width_in: float) -> list[str]:
    """Input and prediction, then the run, wrapped to the figure's width (about 11 characters an inch)."""
    width = max(40, int(width_in * 11))
    lines = textwrap.wrap(f"input “{' '.join(maps.words)}”   →   prediction “{' '.join(maps.predictions)}”", width)
    return lines + (textwrap.wrap(maps.description, width) if maps.description else [])


def grid_figure(maps: AttentionMaps):
    """Rows = layers, columns = heads; words on both axes of every panel; one shared colorbar."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    from attention_lab.plotting.heatmaps import draw_heatmap

    scale = maps.colour_scale()

    rows, cols = maps.layers, maps.heads
    n_q, n_k = len(maps.query_words), len(maps.words)
    title = grid_title(maps, grid_figsize(rows, cols, n_q, n_k)[0])
    fig = Figure(figsize=grid_figsize(rows, cols, n_q, n_k, len(title)), dpi=DPI, layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for layer in range(rows):
        for head in range(cols):
            ax = axes[layer][head]
            draw_heatmap(ax, maps.weights[layer][head], maps.query_words, maps.words,
                         f"{maps.layer_label(layer)} · head {head}", scale=scale)
            ax.set_xlabel("key (attended to)" if layer == rows - 1 else "")
            ax.set_ylabel(maps.query_axis if head == 0 else "")
    fig.colorbar(ScalarMappable(Normalize(scale.vmin, scale.vmax), cmap=scale.cmap), ax=axes,
                 shrink=min(1.0, 0.9 / rows ** 0.5), label=scale.label)
    fig.suptitle("\n".join(title), fontsize=11)
    return fig


def save_grid_png(maps: AttentionMaps, path: Path) -> Path:
    """The grid as a 256-colour PNG (a third of the RGBA size, same look), its layout in the metadata."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image, PngImagePlugin

    canvas = FigureCanvasAgg(grid_figure(maps))
    canvas.draw()
    image = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba()).convert("RGB")
    info = PngImagePlugin.PngInfo()
    layout = {"layers": maps.layers, "heads": maps.heads, "query_words": maps.query_words, "key_words": maps.words,
              "title": canvas.figure.get_suptitle().splitlines(), "colour_scale": maps.colour_scale().as_dict()}
    info.add_text("Title", maps.text)
    info.add_text("Description", json.dumps(layout))
    info.add_text("Software", "attention-lab scripts/visualize.py")
    image.quantize(256, method=Image.Quantize.MEDIANCUT).save(path, pnginfo=info, optimize=True)
    return path
