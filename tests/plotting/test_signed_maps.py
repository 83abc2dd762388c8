"""Maps that are not in [0, 1] (diff's signed difference, a recurrence's implied map) get a colour scale
symmetric around 0 in the PNG grid and the TensorBoard images; row-stochastic kinds keep the fixed 0–1 scale."""

from __future__ import annotations

import numpy as np
import pytest

from attention_lab.plotting.colour_scale import UNIT_SCALE, colour_scale
from attention_lab.plotting.heatmaps import HeatmapFigure, weight_label
from attention_lab.review.attention_maps import AttentionMaps
from attention_lab.review.grid import grid_figure

WORDS = ["a", "b", "c"]


def maps_of(kind: str, weights: np.ndarray) -> AttentionMaps:
    return AttentionMaps(text="a b c", words=WORDS, query_words=WORDS, predictions=WORDS, weights=[weights],
                         kinds=[kind])


def signed_weights() -> np.ndarray:
    return np.array([[[1.0, 0.0, 0.0], [-0.4, 0.7, 0.0], [0.2, -0.1, 0.5]]])  # (H=1, T, T)


@pytest.mark.parametrize("kind", ["softmax", "linear", "sigmoid"])
def test_weights_in_the_unit_interval_keep_the_fixed_scale(kind):
    assert colour_scale([kind], 0.3) == UNIT_SCALE
    figure = grid_figure(maps_of(kind, np.full((1, 3, 3), 0.3)))
    colorbar = figure.axes[-1]
    assert colorbar.get_ylim() == pytest.approx((0.0, 1.0)) and colorbar.get_ylabel() == "attention weight"


@pytest.mark.parametrize("kind", ["diff", "delta", "ssm", "conv"])
def test_a_signed_map_gets_a_symmetric_scale_around_zero(kind):
    figure = grid_figure(maps_of(kind, signed_weights()))
    image = figure.axes[0].images[0]
    negative, zero, positive = (image.to_rgba(image.get_array()[i, j]) for i, j in ((1, 0), (0, 1), (1, 1)))
    assert negative != zero and positive != zero and negative != positive
    colorbar = figure.axes[-1]
    assert colorbar.get_ylim() == pytest.approx((-1.0, 1.0)) and "signed" in colorbar.get_ylabel()
    assert colour_scale([kind], 2.5).vmin == -2.5  # the bound follows the data: a map above 1 is not clipped
    assert colour_scale(["softmax", kind], 0.5).signed  # a stack with one signed layer


def cell_colours(figure: HeatmapFigure, weights: np.ndarray, cells) -> list[tuple[int, ...]]:
    """The rendered colour of each (row, column) cell, a few pixels off its centre (beside its label)."""
    image = figure.render(weights, "probe")
    ax = figure.figure.axes[0]
    height = image.shape[0]
    return [tuple(image[int(height - y) - 6, int(x) + 6]) for x, y in
            (ax.transData.transform((col, row)) for row, col in cells)]


def test_the_tensorboard_image_of_a_signed_map_tells_negative_from_zero():
    weights, cells = signed_weights()[0], [(0, 1), (1, 0)]  # 0 and −0.4
    zero, negative = cell_colours(HeatmapFigure(WORDS, WORDS, "probe", colour_scale(["diff"], 1.0)), weights, cells)
    assert zero != negative
    zero, negative = cell_colours(HeatmapFigure(WORDS, WORDS, "probe"), weights, cells)
    assert zero == negative  # the 0–1 scale clips −0.4 to 0


def test_a_cell_that_rounds_to_zero_prints_without_a_sign():
    signed = colour_scale(["ssm"], 1.5)
    assert weight_label(-0.0004, signed)[0] == "0.00" and weight_label(-0.0004)[0] == "0.00"
    assert weight_label(-0.006, signed)[0] == "-0.01"  # a real negative weight keeps its sign
