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
from attention_lab.plotting import attention_figure, run_title

DRAWN = tuple(family for family in FAMILIES if family != ENTROPY)


def score_image(grid: list[list[float]], kind: str, step: int, run_name: str = "") -> np.ndarray:
    """The heatmap of a layers x heads grid as an (H, W, 3) uint8 image: heads across, layers down."""
    name = kind.removeprefix("head_score/")
    figure = attention_figure(np.asarray(grid), [f"layer {layer}" for layer in range(len(grid))],
                              [f"head {h}" for h in range(len(grid[0]))],
                              run_title(run_name, f"{name}{'' if '/' in name else ' score'} · step {step}"),
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
                writer.add_image(family, score_image(cells, family, step, self.run_name), step, dataformats="HWC")
