"""Per-head measurements as pictures: after each validation, one layers x heads heatmap per head score (tags
``head_score/<kind>``), per ablation (``ablation/<how>/<metric>``) and of the patching (``patching/logit_diff``)
in TensorBoard, drawn from the scalars the
run logged (``<family>/layer{l}/head{h}``, see :mod:`attention_lab.head_metrics`)."""

from __future__ import annotations

import math

import lightning as L
import numpy as np
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from matplotlib.backends.backend_agg import FigureCanvasAgg

from attention_lab.head_metrics import ENTROPY, FAMILIES, grid
from attention_lab.plotting import HeatmapFigure, attention_figure, run_title

DRAWN = tuple(family for family in FAMILIES if family != ENTROPY)


def grid_axes(grid: list[list[float]]) -> tuple[list[str], list[str]]:
    """The words on a layers x heads grid's axes: layers down, heads across."""
    return [f"layer {layer}" for layer in range(len(grid))], [f"head {h}" for h in range(len(grid[0]))]


def grid_title(kind: str, step: int, run_name: str = "") -> str:
    name = kind.removeprefix("head_score/")
    return run_title(run_name, f"{name}{'' if '/' in name else ' score'} · step {step}")


def score_image(grid: list[list[float]], kind: str, step: int, run_name: str = "") -> np.ndarray:
    """The heatmap of a layers x heads grid as an (H, W, 3) uint8 image: heads across, layers down."""
    figure = attention_figure(np.asarray(grid), *grid_axes(grid), grid_title(kind, step, run_name),
                              xlabel="head", ylabel="layer")
    if not kind.startswith("head_score/"):  # a loss increase, a drop or a restored fraction may pass 1 or 0
        values = [v for row in grid for v in row if not math.isnan(v)]
        figure.axes[0].images[0].set_clim(min(0.0, *values), max(1e-6, *values))
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


class HeadScoreMaps(L.Callback):
    """Draws the head scores and ablations of the final validation, and with ``every_n_steps`` those of the
    validation after every that many training steps too (drawing costs more than the validation itself; the
    scalars hold every validation's values); nothing without a TensorBoard logger. ``kinds``: score kinds
    (``induction``) or families (``ablation/zero/loss``); default every family but the entropy."""

    def __init__(self, kinds: tuple[str, ...] | list[str] = DRAWN, every_n_steps: int | None = None,
                 run_name: str = "") -> None:
        self.families = tuple(k if k in FAMILIES else f"head_score/{k}" for k in kinds)
        self.run_name = run_name  # in every title: which config a map belongs to
        self.every_n_steps = every_n_steps
        # The final validation repeats the last step's: each family is drawn once a step (the ablations, measured
        # only in the final validation by default, are new there).
        self.drawn_at: dict[str, int] = {}
        # The head scores share one colour scale (0 to 1) and, for a grid shape, one frame: a figure drawn once and
        # redrawn for each score (HeatmapFigure), in a fraction of a new figure's time.
        self.figures: dict[tuple[int, int], HeatmapFigure] = {}

    def image(self, grid: list[list[float]], family: str, step: int) -> np.ndarray:
        """The family's heatmap: the image :func:`score_image` draws."""
        if not family.startswith("head_score/"):  # an ablation's or the patching's colours follow its own values
            return score_image(grid, family, step, self.run_name)
        title, shape = grid_title(family, step, self.run_name), (len(grid), len(grid[0]))
        if shape not in self.figures:
            self.figures[shape] = HeatmapFigure(*grid_axes(grid), title, xlabel="head", ylabel="layer")
        figure = self.figures[shape]
        if not figure.draws_as_new(title):
            return score_image(grid, family, step, self.run_name)
        return figure.render(np.asarray(grid, dtype=float), title)

    @rank_zero_only
    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        if trainer.state.fn == "fit" and (self.every_n_steps is None or trainer.global_step % self.every_n_steps):
            return
        writer = next((logger.experiment for logger in trainer.loggers if isinstance(logger, TensorBoardLogger)), None)
        if writer is None:
            return
        step = trainer.global_step
        metrics = {name: float(value) for name, value in trainer.callback_metrics.items()}
        for family in self.families:
            cells = grid(metrics, family)
            if cells is not None and self.drawn_at.get(family) != step:
                self.drawn_at[family] = step
                writer.add_image(family, self.image(cells, family, step), step, dataformats="HWC")
