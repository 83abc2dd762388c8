"""The PNG of a run's attention maps: rows = layers, columns = heads, words on both axes of every
panel, one shared colorbar, and the layout in the PNG's metadata. This module says what the grid holds (the
sentence, the prediction, the run); :mod:`attention_lab.plotting.grid` draws it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from attention_lab.review.attention_maps import AttentionMaps

if TYPE_CHECKING:
    from attention_lab.plotting.grid import MapGrid


def map_grid(maps: AttentionMaps) -> MapGrid:
    """The maps as the grid draws them; the title: input and prediction, then the run."""
    from attention_lab.plotting.grid import MapGrid  # matplotlib: imported by the commands that draw

    return MapGrid(maps.weights, maps.query_words, maps.words, [maps.layer_label(layer) for layer in range(maps.layers)],
                   maps.query_axis, maps.colour_scale(),
                   [f"input “{' '.join(maps.words)}”   →   prediction “{' '.join(maps.predictions)}”", maps.description],
                   maps.text)


def grid_figure(maps: AttentionMaps):
    """The grid as a matplotlib Figure (:func:`attention_lab.plotting.grid.grid_figure`)."""
    from attention_lab.plotting import grid

    return grid.grid_figure(map_grid(maps))


def save_grid_png(maps: AttentionMaps, path: Path) -> Path:
    """The grid as a 256-colour PNG, its layout in the metadata (:func:`attention_lab.plotting.grid.save_grid_png`)."""
    from attention_lab.plotting import grid

    return grid.save_grid_png(map_grid(maps), path)
