"""Attention heatmaps with words on the axes (matplotlib Figure on an Agg canvas, no pyplot state)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.figure import Figure
from matplotlib.font_manager import FontProperties
from matplotlib.path import Path
from matplotlib.textpath import TextPath
from matplotlib.transforms import Affine2D, Bbox

from attention_lab.plotting.colour_scale import UNIT_SCALE, ColourScale

ANNOTATED_CELLS = 100  # maps with at most this many cells show their weights
ANNOTATION_SIZE = 7  # points
CELL_SIZE = 0.4  # inches per cell of attention_figure: room for "0.00" at ANNOTATION_SIZE
# TensorBoard fits images to its cards (about 350 px wide) unless asked for their actual size. At 80 dpi a
# 6-word map is about that wide, and its PNG small: encoding it and TensorBoard's checksum of it cost the
# TensorBoard callback more than drawing it.
DPI = 80
# TensorBoard's Images dashboard draws every image 350 px wide (its card, tf-image-loader's width), scaled with
# `image-rendering: pixelated`: a 2-layer × 4-head grid drawn at DPI (246 px) came out blocky and its numbers hard to
# read. The small grids are drawn at the dpi that makes them that wide (card_dpi), up to MAX_DPI; wider ones at DPI.
CARD_WIDTH = 350
MAX_DPI = 120
TRIM_PAD = 3 / 72  # inches left around the text of a trimmed figure


def run_title(run_name: str, detail: str, limit: int = 40) -> str:
    """A map's title: which run (its name, the overrides that set it apart; "defaults" for none), then what the
    map shows. Long names are cut: the figure is sized for the words, not the name."""
    name = run_name or "defaults"
    return f"{name if len(name) <= limit else name[: limit - 1] + '…'}\n{detail}"


def weight_label(value: float, scale: ColourScale = UNIT_SCALE) -> tuple[str, str]:
    """The annotation of a cell: its text and colour (dark text on the bright end of viridis, and on the pale
    middle of a signed scale)."""
    text = f"{value:.2f}"
    text = "0.00" if text == "-0.00" else text  # a tiny negative weight (a signed map above its diagonal) is 0
    if scale.signed:
        return text, "black" if abs(value) < 0.6 * scale.vmax else "white"
    return text, "black" if value > 0.6 else "white"


def label_path(text: str) -> Path:
    """``text`` as an outline in points, centred on (0, 0), to place in a cell."""
    path = TextPath((0, 0), text, size=ANNOTATION_SIZE, prop=FontProperties())
    # The box of the glyphs' points (control points included: close enough, and far cheaper than get_extents,
    # which solves each curve for its extremes)
    ink = path.vertices[path.codes != Path.CLOSEPOLY]  # a close code's vertex is a placeholder at (0, 0)
    (x0, y0), (x1, y1) = ink.min(axis=0), ink.max(axis=0)
    return path.transformed(Affine2D().translate(-(x0 + x1) / 2, -(y0 + y1) / 2))


def draw_heatmap(ax, weights, query_words: Sequence[str], key_words: Sequence[str], title: str = "", *,
                 xlabel: str = "key (attended to)", ylabel: str = "query", scale: ColourScale = UNIT_SCALE) -> None:
    """weights: (T_q, T_k) array-like. Rows = queries (y axis), columns = keys (x axis); colours on ``scale``."""
    # interpolation "none" without resampling: Agg scales the cells as it draws them, in half the time of
    # "nearest". Above the tick marks (which end on the cells' edge), below the spines: the TensorBoard
    # callback draws the frame once and then only the cells, spines and weights again, in this order.
    ax.imshow(weights, cmap=scale.cmap, vmin=scale.vmin, vmax=scale.vmax, interpolation="none", resample=False,
              zorder=2)
    ax.set_xticks(range(len(key_words)), labels=key_words, rotation=45, ha="right")
    ax.set_yticks(range(len(query_words)), labels=query_words)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    if len(query_words) * len(key_words) <= ANNOTATED_CELLS:  # annotate small maps with their weights
        # One collection of text outlines, not a Text per cell: the renderer draws a collection in one call, where
        # each Text artist is laid out and drawn on its own (the TensorBoard callback redraws it for every head at
        # every logging event).
        cells = [(j, i) for i in range(len(query_words)) for j in range(len(key_words))]
        labels = [weight_label(float(weights[i][j]), scale) for j, i in cells]
        paths = {text: label_path(text) for text in {text for text, _ in labels}}  # each text once
        points_to_pixels = Affine2D().scale(1 / 72) + ax.figure.dpi_scale_trans
        ax.add_collection(PathCollection([paths[text] for text, _ in labels], offsets=cells,
                                         offset_transform=ax.transData, transform=points_to_pixels,
                                         facecolors=[color for _, color in labels], linewidths=0, zorder=3),
                          autolim=False)


def attention_figure(weights, query_words: Sequence[str], key_words: Sequence[str], title: str = "", *,
                     xlabel: str = "key (attended to)", ylabel: str = "query",
                     scale: ColourScale = UNIT_SCALE, dpi: int = DPI) -> Figure:
    """One heatmap and its colorbar, with cells of CELL_SIZE inches, in a figure trimmed to its text, drawn at
    ``dpi``.

    Laid out by hand, once: constrained layout would measure every artist again at each draw. Positions are
    whole pixels, so that the cells have sharp edges (and cells drawn again look as the first ones)."""

    def pixels(inches: float) -> int:
        return round(inches * dpi)

    width, height = pixels(max(len(key_words), 1) * CELL_SIZE), pixels(max(len(query_words), 1) * CELL_SIZE)
    bar_gap, bar_width, pad, margin = pixels(0.12), pixels(0.15), pixels(TRIM_PAD), pixels(4)

    def place(left: int, bottom: int, fig_width: int, fig_height: int) -> None:
        """The heatmap's lower left corner at (left, bottom) in a figure of fig_width x fig_height pixels."""
        fig.set_size_inches(fig_width / dpi, fig_height / dpi)
        ax.set_position((left / fig_width, bottom / fig_height, width / fig_width, height / fig_height))
        cax.set_position(((left + width + bar_gap) / fig_width, bottom / fig_height,
                          bar_width / fig_width, height / fig_height))

    fig = Figure(dpi=dpi)
    canvas = FigureCanvasAgg(fig)
    ax, cax = fig.add_axes((0, 0, 1, 1)), fig.add_axes((0, 0, 1, 1))
    place(margin, margin, width + 2 * margin, height + 2 * margin)  # margins that hold every label
    draw_heatmap(ax, weights, query_words, key_words, title, xlabel=xlabel, ylabel=ylabel, scale=scale)
    fig.colorbar(ax.images[0], cax=cax, label=scale.label if scale.signed else None)
    # What the words, axis labels, title and colorbar take around the heatmap does not depend on where the
    # heatmap is: measure it once and trim the margins to it.
    renderer = canvas.get_renderer()
    drawn = Bbox.union([ax.get_tightbbox(renderer), cax.get_tightbbox(renderer)])  # pixels
    x0, y0, x1, y1 = math.floor(drawn.x0), math.floor(drawn.y0), math.ceil(drawn.x1), math.ceil(drawn.y1)
    place(margin - x0 + pad, margin - y0 + pad, x1 - x0 + 2 * pad, y1 - y0 + 2 * pad)
    return fig


class HeatmapFigure:
    """One ``attention_figure`` for a word layout, redrawn for every map.

    Its frame (words, axis labels, colorbar) is drawn once and kept; each map redraws only what changes, in
    the order a full draw uses: the cells, the spines over their edges, the weights and the title
    (matplotlib's blitting). A full ``canvas.draw()`` would lay out the frame's text again for every map."""

    def __init__(self, query_words: Sequence[str], key_words: Sequence[str], title: str,
                 scale: ColourScale = UNIT_SCALE, *, xlabel: str = "key (attended to)", ylabel: str = "query",
                 dpi: int = DPI) -> None:
        self.scale, self.dpi = scale, dpi  # its colorbar is part of the kept frame: another scale is another figure
        self.figure = attention_figure(np.zeros((len(query_words), len(key_words))), query_words, key_words, title,
                                       xlabel=xlabel, ylabel=ylabel, scale=scale, dpi=dpi)
        self.canvas = FigureCanvasAgg(self.figure)
        ax = self.figure.axes[0]
        self.image, self.title = ax.images[0], ax.title
        self.labels = ax.collections[0] if ax.collections else None  # None: too many cells to annotate
        self.label_paths: dict[str, Path] = {}  # "0.42" -> its outline: at most 101 of them
        self.changing = sorted([self.image, *ax.spines.values(), *ax.collections, self.title],
                               key=lambda artist: artist.get_zorder())
        renderer = self.canvas.get_renderer()
        self.title.set_visible(False)
        # What the figure's width was trimmed to without the title: the map, its words and its colorbar
        self.content = Bbox.union([ax.get_tightbbox(renderer), self.figure.axes[1].get_tightbbox(renderer)])
        self.title.set_visible(True)
        self.sized_by_content = self.within_content(self.title_box(title))
        for artist in self.changing:
            artist.set_animated(True)  # left out of canvas.draw(): the background has empty cells
        self.laid_out_for = title
        # The frame is drawn at its first map, not here: a frame built only to measure widths (card_dpi tries a
        # few dpis) never draws, and drawing is half of building one.
        self.background: Any = None
        self.first_title: tuple[float, float, float, float] | None = None

    def draw_frame(self) -> None:
        """Draw what every map shares (the words, axis labels, colorbar) once, and keep it."""
        if self.background is None:
            self.title.set_text(self.laid_out_for)  # as when the frame was laid out: a draw places the title
            self.canvas.draw()
            self.background = self.canvas.copy_from_bbox(self.figure.bbox)
            # Where the title the frame was laid out for is drawn (measured after a draw: drawing places the title)
            self.first_title = self.title_box(self.laid_out_for).bounds

    def width_for(self, title: str) -> int:
        """The width, in pixels, of a new :func:`attention_figure` of this frame's map with ``title`` at this frame's
        dpi: its text (the map's words, the colorbar, the title) and the room around it."""
        drawn = Bbox.union([self.content, self.title_box(title)])
        return math.ceil(drawn.x1) - math.floor(drawn.x0) + 2 * round(TRIM_PAD * self.dpi)

    def title_box(self, title: str) -> Bbox:
        """Where ``title`` is drawn, in pixels (it becomes the title)."""
        self.title.set_text(title)
        return self.title.get_window_extent(self.canvas.get_renderer())

    def fits(self, title: str) -> bool:
        """Whether ``title`` fits the width this figure was laid out for (it becomes the title)."""
        box = self.title_box(title)
        return box.x0 >= 0 and box.x1 <= self.figure.bbox.width

    def within_content(self, box: Bbox) -> bool:
        """Whether a title drawn at ``box`` spans no wider than the map, its words and its colorbar. When this
        figure's own first title did too, redrawing it for such a title gives, pixel for pixel, the image of a new
        figure for it: the title set neither figure's width."""
        return self.content.x0 <= box.x0 and box.x1 <= self.content.x1

    def draws_as_new(self, title: str) -> bool:
        """Whether redrawing this figure for ``title`` gives, pixel for pixel, the image of a new figure for it (it
        becomes the title): it is drawn where the frame's first title was, so it sets the width as that one did
        (a long run name, the same in every title of a run), or both span no wider than the map, its words and
        its colorbar, so neither set it."""
        self.draw_frame()
        box = self.title_box(title)
        return box.bounds == self.first_title or (self.sized_by_content and self.within_content(box))

    def render(self, weights: np.ndarray, title: str) -> np.ndarray:
        """The heatmap of ``weights`` (T_q, T_k) as an (H, W, 3) uint8 image: a view of the canvas, valid
        until the next render."""
        self.draw_frame()
        self.image.set_data(weights)
        if self.labels is not None:
            texts, colors = zip(*(weight_label(float(w), self.scale) for w in np.ravel(weights)), strict=True)
            for text in texts:
                if text not in self.label_paths:
                    self.label_paths[text] = label_path(text)
            self.labels.set_paths([self.label_paths[text] for text in texts])
            self.labels.set_facecolor(colors)
        self.title.set_text(title)
        self.canvas.restore_region(self.background)
        for artist in self.changing:
            self.figure.draw_artist(artist)
        return np.asarray(self.canvas.buffer_rgba())[..., :3]



def card_dpi(frame_at: Callable[[int], HeatmapFigure], title: str) -> int:
    """The dpi at which a map with ``title`` comes out as wide as TensorBoard's image card and no wider, as near as
    whole dpis come: at least DPI (a map wider than the card at DPI stays at DPI), at most MAX_DPI. ``frame_at(dpi)``:
    the map's frame (any title) drawn at ``dpi``. Estimated from its width at DPI, then checked at the dpi chosen:
    text drawn at another size is not exactly that much wider."""
    dpi = max(DPI, min(MAX_DPI, math.floor(DPI * CARD_WIDTH / frame_at(DPI).width_for(title))))
    while dpi > DPI and frame_at(dpi).width_for(title) > CARD_WIDTH:
        dpi -= 1
    return dpi
