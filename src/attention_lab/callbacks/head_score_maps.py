"""Per-head measurements as pictures: after each validation, one layers x heads heatmap per head score (tags
``per_head/head_score/<kind>``), per ablation (``per_head/ablation/<how>/<metric>``) and of the patching
(``per_head/patching/logit_diff``) in TensorBoard, drawn from the scalars the run logged
(``<family>/layer{l}/head{h}``, see :mod:`attention_lab.analysis.tags`); and where the run measured path patching, one
senders x receiver inputs heatmap of it (``per_head/path_patching/logit_diff``, :func:`path_image`).

Under ``per_head/``: TensorBoard's Images dashboard sorts its sections by the tags' first part and opens the first
two, so that ``ablation/...`` came before the probe's attention maps (``attention/layer{l}/head{h}``, the maps that
show what a head does). ``per_head`` sorts after ``attention``. Each grid is drawn at the dpi that makes it as wide
as the dashboard's card (:func:`attention_lab.plotting.heatmaps.card_dpi`): the dashboard scales every image to it.
This module says which measurements are drawn, when, and with which titles; :mod:`attention_lab.plotting.score_maps`
draws them."""

from __future__ import annotations

import lightning as L
import numpy as np
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only

from attention_lab.analysis.tags import ENTROPY, FAMILIES, PATH_DIRECT, PATH_PATCHING, grid, path_grid
from attention_lab.plotting.heatmaps import HeatmapFigure, run_title
from attention_lab.plotting.path_maps import head_label, path_grid_image
from attention_lab.plotting.score_maps import fitted_dpi, grid_frame, score_grid_image

DRAWN = tuple(family for family in FAMILIES if family != ENTROPY)
# The step the grids' dpi is fitted for (grid_dpi): a title naming a later one makes its image a little wider.
LONGEST_STEP = 99_999_999
IMAGE_SECTION = "per_head"  # the Images dashboard's section of these heatmaps: after "attention" (the probe's maps)


def image_tag(family: str) -> str:
    """The TensorBoard image tag of a family's heatmap."""
    return f"{IMAGE_SECTION}/{family}"


def grid_title(kind: str, step: int, run_name: str = "") -> str:
    name = kind.removeprefix("head_score/")
    return run_title(run_name, f"{name}{'' if '/' in name else ' score'} · step {step}")


def grid_dpi(grid: list[list[float]], run_name: str = "") -> int:
    """The dpi of a grid's heatmaps in a run: the widest that fits TensorBoard's image card with the widest title the
    run can give them (any family, a step of up to LONGEST_STEP), so that all of a run's grids of one shape share
    it and one frame (:class:`HeadScoreMaps`)."""
    return fitted_dpi(grid, (grid_title(family, LONGEST_STEP, run_name) for family in DRAWN))


def score_image(grid: list[list[float]], kind: str, step: int, run_name: str = "", dpi: int | None = None) -> np.ndarray:
    """The heatmap of a layers x heads grid as an (H, W, 3) uint8 image: heads across, layers down, at ``dpi``
    (default: :func:`grid_dpi`'s). A head score keeps the 0..1 scale; an ablation's or the patching's colours follow
    its own values."""
    return score_grid_image(grid, grid_title(kind, step, run_name), grid_dpi(grid, run_name) if dpi is None else dpi,
                            own_scale=not kind.startswith("head_score/"))


def path_image(metrics: dict[str, float], step: int, run_name: str = "") -> np.ndarray | None:
    """The heatmap of the logged path patching values (:func:`~attention_lab.analysis.tags.path_grid`): a row per
    sender head, a column per receiver input (``L1H0 q``) and ``logits`` last; None when none is logged."""
    found = path_grid(metrics)
    if found is None:
        return None
    senders, columns, cells = found
    inputs = [PATH_DIRECT if receiver is None else f"{head_label(*receiver)} {kind}" for receiver, kind in columns]
    title = run_title(run_name, f"path patching · step {step}")
    return path_grid_image(cells, [head_label(*sender) for sender in senders], inputs, title)


class HeadScoreMaps(L.Callback):
    """Draws the head scores and ablations of the final validation, and with ``every_n_steps`` those of the
    validation after every that many training steps too (drawing costs more than the validation itself; the
    scalars hold every validation's values); nothing without a TensorBoard logger. ``kinds``: score kinds
    (``induction``) or families (``ablation/zero/loss``, ``path_patching/logit_diff``); default every family but the
    entropy, and the path patching."""

    def __init__(self, kinds: tuple[str, ...] | list[str] = (*DRAWN, PATH_PATCHING), every_n_steps: int | None = None,
                 run_name: str = "") -> None:
        self.families = tuple(k if k in FAMILIES else f"head_score/{k}" for k in kinds if k != PATH_PATCHING)
        self.paths = PATH_PATCHING in kinds  # not a layers x heads grid: its own picture (path_image)
        self.run_name = run_name  # in every title: which config a map belongs to
        self.every_n_steps = every_n_steps
        # The final validation repeats the last step's: each family is drawn once a step (the ablations, measured
        # only in the final validation by default, are new there).
        self.drawn_at: dict[str, int] = {}
        # The head scores share one colour scale (0 to 1) and, for a grid shape, one dpi (grid_dpi) and one frame: a
        # figure drawn once and redrawn for each score (HeatmapFigure), in a fraction of a new figure's time.
        self.dpis: dict[tuple[int, int], int] = {}
        self.figures: dict[tuple[int, int], HeatmapFigure] = {}

    def image(self, grid: list[list[float]], family: str, step: int) -> np.ndarray:
        """The family's heatmap: the image :func:`score_image` draws."""
        title, shape = grid_title(family, step, self.run_name), (len(grid), len(grid[0]))
        if shape not in self.dpis:
            self.dpis[shape] = grid_dpi(grid, self.run_name)
        if not family.startswith("head_score/"):  # an ablation's or the patching's colours follow its own values
            return score_image(grid, family, step, self.run_name, self.dpis[shape])
        if shape not in self.figures:
            self.figures[shape] = grid_frame(grid, title, self.dpis[shape])
        figure = self.figures[shape]
        if not figure.draws_as_new(title):
            return score_image(grid, family, step, self.run_name, self.dpis[shape])
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
                writer.add_image(image_tag(family), self.image(cells, family, step), step, dataformats="HWC")
        if self.paths and self.drawn_at.get(PATH_PATCHING) != step \
                and (image := path_image(metrics, step, self.run_name)) is not None:
            self.drawn_at[PATH_PATCHING] = step
            writer.add_image(image_tag(PATH_PATCHING), image, step, dataformats="HWC")
