"""Attention heatmaps with words on the axes (matplotlib, Agg backend, no pyplot state)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.font_manager import FontProperties  # noqa: E402


def draw_heatmap(ax, weights, query_words: Sequence[str], key_words: Sequence[str], title: str = "") -> None:
    """weights: (T_q, T_k) array-like. Rows = queries (y axis), columns = keys (x axis)."""
    ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(key_words)), labels=key_words, rotation=45, ha="right")
    ax.set_yticks(range(len(query_words)), labels=query_words)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    if len(query_words) * len(key_words) <= ANNOTATED_CELLS:  # annotate small maps with their weights
        for i in range(len(query_words)):
            for j in range(len(key_words)):
                text, color = weight_label(float(weights[i][j]))
                ax.text(j, i, text, ha="center", va="center", fontsize=ANNOTATION_SIZE, color=color)


# The cell annotations of draw_heatmap (also painted by callbacks.HeatmapImages, which must match them).
ANNOTATED_CELLS = 100  # maps with at most this many cells show their weights
ANNOTATION_SIZE = 7  # points


def weight_label(value: float) -> tuple[str, str]:
    """The annotation of a cell: its text and colour (dark text on the bright end of viridis)."""
    return f"{value:.2f}", "black" if value > 0.6 else "white"


def attention_figure(weights, query_words: Sequence[str], key_words: Sequence[str], title: str = "") -> Figure:
    n_q, n_k = max(len(query_words), 1), max(len(key_words), 1)
    size = 1.5 + 0.55 * max(n_q, n_k)
    fig = Figure(figsize=(size + 1.0, size))
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))
    draw_heatmap(ax, weights, query_words, key_words, title)
    # Laid out by hand from the text extents: constrained layout measures every artist again at each draw,
    # which made a figure 1.5-2x slower to render (the TensorBoard callback used to draw one per head).
    renderer = FigureCanvasAgg(fig).get_renderer()

    def extent(text) -> tuple[float, float]:  # (width, height) in inches, rotation included
        if not text.get_text():
            return 0.0, 0.0
        box = text.get_window_extent(renderer)
        return box.width / fig.dpi, box.height / fig.dpi

    pad, tick, labelpad, titlepad = 3 / 72, 7 / 72, 4 / 72, 6 / 72  # matplotlib's defaults, in inches
    x_ticks = [extent(t) for t in ax.get_xticklabels()]
    left = pad + extent(ax.yaxis.label)[0] + labelpad + max((extent(t)[0] for t in ax.get_yticklabels()), default=0) + tick
    bottom = pad + extent(ax.xaxis.label)[1] + labelpad + max((h for _, h in x_ticks), default=0) + tick
    title_width, title_height = extent(ax.title)
    top = pad + (title_height + titlepad if title else 0.0)
    bar_font = FontProperties(size=matplotlib.rcParams["ytick.labelsize"])
    bar_labels = renderer.get_text_width_height_descent("0.00", bar_font, ismath=False)[0] / fig.dpi
    bar_gap, bar_width = 0.12, 0.15
    right = bar_gap + bar_width + tick + bar_labels + pad  # the colorbar, its ticks and "0.00" ... "1.00"
    width, height = size + 1.0, size
    cell = min((width - left - right) / n_k, (height - bottom - top) / n_q)
    # Rotated key words hang left of their column (ha="right"): long first words need a wider margin.
    left = max(left, pad + max((w - (j + 0.5) * cell for j, (w, _) in enumerate(x_ticks)), default=0))
    cell = min((width - left - right) / n_k, (height - bottom - top) / n_q)
    ax_width, ax_height = cell * n_k, cell * n_q
    # The title is centred over the axes: room for its halves on both sides.
    left = max(left, pad + title_width / 2 - ax_width / 2)
    right = max(right, pad + title_width / 2 - ax_width / 2)
    width, height = left + ax_width + right, bottom + ax_height + top  # the figure fits its contents
    fig.set_size_inches(width, height)
    ax.set_position((left / width, bottom / height, ax_width / width, ax_height / height))
    cax = fig.add_axes(((left + ax_width + bar_gap) / width, bottom / height, bar_width / width, ax_height / height))
    fig.colorbar(ax.images[0], cax=cax)
    return fig
