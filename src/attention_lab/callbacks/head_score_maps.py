"""Head scores as pictures: after each validation, one layers x heads heatmap per kind of score (tags
``head_score/<kind>``) in TensorBoard, drawn from the scalars the module logged (``head_score/<kind>/layer{l}/
head{h}``, see :mod:`attention_lab.head_scores`)."""

from __future__ import annotations

import lightning as L
import numpy as np
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only
from matplotlib.backends.backend_agg import FigureCanvasAgg

from attention_lab.head_scores import KINDS, score_grid
from attention_lab.plotting import attention_figure, run_title


def score_image(grid: list[list[float]], kind: str, step: int, run_name: str = "") -> np.ndarray:
    """The heatmap of a layers x heads grid as an (H, W, 3) uint8 image: heads across, layers down."""
    figure = attention_figure(np.asarray(grid), [f"layer {layer}" for layer in range(len(grid))],
                              [f"head {h}" for h in range(len(grid[0]))],
                              run_title(run_name, f"{kind} score · step {step}"),
                              xlabel="head", ylabel="layer")
    canvas = FigureCanvasAgg(figure)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


class HeadScoreMaps(L.Callback):
    """Draws the head scores of the validation after every ``every_n_steps`` training steps (the cadence of the
    attention maps: drawing costs more than the validation itself) and of the final validation; nothing
    without a TensorBoard logger."""

    def __init__(self, kinds: tuple[str, ...] | list[str] = KINDS, every_n_steps: int = 200, run_name: str = "") -> None:
        self.kinds = tuple(kinds)
        self.run_name = run_name  # in every title: which config a map belongs to
        self.every_n_steps = every_n_steps
        self.last_logged_step = -1  # the final validation repeats the last step's: drawn once

    @rank_zero_only
    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or trainer.global_step == self.last_logged_step:
            return
        if trainer.state.fn == "fit" and trainer.global_step % self.every_n_steps:
            return
        writer = next((logger.experiment for logger in trainer.loggers if isinstance(logger, TensorBoardLogger)), None)
        if writer is None:
            return
        self.last_logged_step = trainer.global_step
        metrics = {name: float(value) for name, value in trainer.callback_metrics.items()
                   if name.startswith("head_score/")}
        for kind in self.kinds:
            grid = score_grid(metrics, kind)
            if grid is not None:
                writer.add_image(f"head_score/{kind}", score_image(grid, kind, trainer.global_step, self.run_name),
                                 trainer.global_step, dataformats="HWC")
