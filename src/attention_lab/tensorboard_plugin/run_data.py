"""A run's records as the tab shows them, read through TensorBoard's data provider (so both of its loaders
serve them): the runs, the probe's maps at a step, and the head scores and ablation drops of that step.

The per-head tags are read only for the layers and heads the run's config declares
(:mod:`~attention_lab.tensorboard_plugin.run_config`): the tags are chosen from the provider's listing before any
of their points are asked for. And one answer holds at most MAX_ANSWER_CELLS numbers: each grid is counted
before it is built (:class:`CellBudget`), and an answer beyond that is one line."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from tensorboard.data import provider as data_provider
from tensorboard.plugins.scalar import metadata as scalar_metadata

from attention_lab.plotting.colour_scale import colour_scale
from attention_lab.records.probe_summary import PROBE_TAG, RecordError, WordLayout, check_weights
from attention_lab.records.run_names import PLUGIN_NAME, run_label
from attention_lab.tensorboard_plugin.declared import DeclaredSizes, RunOutside
from attention_lab.tensorboard_plugin.limits import MAX_ANSWER_CELLS, weights_for_page
from attention_lab.tensorboard_plugin.run_config import RunConfig, RunSizes
from attention_lab.tensorboard_plugin.scores import grids_at, parse_tag

MAX_POINTS = 1_000_000  # ask the provider for every point it holds (what it keeps is TensorBoard's sampling)

NO_RECORDS = ("no attention records in this run: it was trained before the attention tab existed, or without "
              "callbacks.attention_maps. The sentence box still works when the run has a checkpoint.")


class NoMaps(Exception):
    """Why a run has no maps to show (``reason`` is the line the tab prints)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class AnswerTooLarge(NoMaps):
    """An answer of more numbers than the tab sends at once: ``what`` it is, at least ``cells`` numbers (counted
    up to the grid that went beyond), ``limit``; ``sizes`` are the layers, heads and indices its tags were read for."""

    def __init__(self, what: str, cells: int, limit: int, sizes: RunSizes) -> None:
        super().__init__(f"{what} hold at least {cells} numbers, more than the {limit} that one answer of the "
                         f"attention tab holds: its records log more steps, or grids wider, than it shows "
                         f"(tags read within {sizes.layers} layers x {sizes.heads} heads and {sizes.indices} "
                         f"indices, from {sizes.source})")
        self.what, self.cells, self.limit, self.sizes = what, cells, limit, sizes


@dataclass
class CellBudget:
    """The numbers one answer holds so far: each grid takes its cells before it is built, and the answer is
    refused (AnswerTooLarge) as soon as they pass ``limit``."""

    what: str
    sizes: RunSizes
    limit: int = MAX_ANSWER_CELLS
    cells: int = 0

    def take(self, cells: int) -> None:
        self.cells += cells
        if self.cells > self.limit:
            raise AnswerTooLarge(self.what, self.cells, self.limit, self.sizes)


def point_maps(content: bytes, chosen) -> dict:
    """The maps of the probe's point ``chosen`` (its words from the summary's ``content``), as the page reads
    them. Raises NoMaps."""
    try:
        layout = WordLayout.from_content(content)
        weights = check_weights(chosen.numpy, layout)
    except RecordError as err:
        raise NoMaps(f"the attention record of this run cannot be read ({err.field}: {err.problem}); "
                     "it was written by another version of attention-lab") from None
    if weights.shape[0] == 0 or weights.shape[1] == 0:
        raise NoMaps("this run's model has no attention heads to show")
    return {"step": chosen.step, "query_words": layout.query_words, "key_words": layout.key_words,
            "query_axis": layout.query_axis, "weights": weights_for_page(weights),
            "scale": colour_scale(layout.kinds, float(np.abs(weights).max())).as_dict()}


@dataclass
class Source:
    """Where the tab reads: the provider, the request's context and experiment, and the check of the sizes
    that the run's files declare (made before the provider is asked for the arrays)."""

    provider: data_provider.DataProvider
    ctx: object
    experiment: str
    declared: DeclaredSizes

    def check_sizes(self, run: str) -> None:
        """Raises NoMaps when a record of ``run`` is not one the tab reads (its size or type)."""
        try:
            problem = self.declared.problem(run)
        except RunOutside as err:
            raise NoMaps(err.reason) from None
        if problem is not None:
            raise NoMaps(f"a record of this run is refused: {problem}")

    def probe_weights(self, run: str) -> tuple[int, int]:
        """The probe records of ``run`` and the weights they declare, every step together, before any array is
        built. Raises NoMaps."""
        self.check_sizes(run)
        try:
            return self.declared.probe_weights(run)
        except RunOutside as err:
            raise NoMaps(err.reason) from None

    def run_config(self, run: str) -> RunConfig:
        """What ``run``'s saved config declares (read once per version of the file). Raises NoMaps."""
        try:
            return self.declared.run_config(run)
        except RunOutside as err:
            raise NoMaps(err.reason) from None

    def run_sizes(self, run: str) -> RunSizes:
        """The layers, heads and indices whose tags the tab reads of ``run``. Raises NoMaps."""
        return self.run_config(run).sizes

    def task_kind(self, run: str) -> str | None:
        """The head-score kind of the task ``run`` trained on (None: no config, or no such kind): the head the
        scores route points at first. Raises NoMaps."""
        return self.run_config(run).task_kind

    def runs(self) -> list[dict]:
        """Every run, with whether it holds attention records and a readable label: runs with records first,
        each group newest first (by the time of the run's first event), then by name."""
        started = {run.run_name: run.start_time or 0.0
                   for run in self.provider.list_runs(self.ctx, experiment_id=self.experiment)}
        with_maps = set(self.provider.list_tensors(self.ctx, experiment_id=self.experiment, plugin_name=PLUGIN_NAME))
        order = sorted(started, key=lambda name: (name not in with_maps, -started[name], name))
        return [{"run": name, "label": run_label(name), "start_time": started[name], "has_maps": name in with_maps,
                 "message": None if name in with_maps else NO_RECORDS} for name in order]

    def known_run(self, run: str) -> bool:
        return any(r.run_name == run for r in self.provider.list_runs(self.ctx, experiment_id=self.experiment))

    def maps(self, run: str, step: int | None) -> dict:
        """The probe's maps of ``run`` at the logged step closest at or before ``step`` (the last when None),
        with every logged step and the steps it clamped heads at (the slider marks them). Raises NoMaps."""
        content, points = self.probe_points(run)
        chosen = points[-1] if step is None else next((d for d in reversed(points) if d.step <= step), points[0])
        return {**self.page_maps(run, content, points, chosen), "clamp": self.clamp(run)}

    def clamp(self, run: str) -> dict | None:
        """The heads ``run`` clamped and the steps [from, until) it clamped them at, as its config says (None: no
        clamp, or no readable config). Raises NoMaps."""
        clamp = self.run_config(run).clamp
        return None if clamp is None else clamp.to_json()

    def probe_points(self, run: str) -> tuple[bytes, list]:
        """The words of ``run``'s probe (the summary's plugin content) and its points, sorted by step (read once by an
        offline snapshot, which holds every step). Raises NoMaps."""
        only_probe = data_provider.RunTagFilter(runs=[run], tags=[PROBE_TAG])
        series = self.provider.list_tensors(self.ctx, experiment_id=self.experiment, plugin_name=PLUGIN_NAME,
                                            run_tag_filter=only_probe).get(run, {}).get(PROBE_TAG)
        if series is None:
            raise NoMaps(NO_RECORDS)
        self.check_sizes(run)
        points = self.provider.read_tensors(self.ctx, experiment_id=self.experiment, plugin_name=PLUGIN_NAME,
                                            run_tag_filter=only_probe, downsample=MAX_POINTS).get(run, {}).get(PROBE_TAG, [])
        if not points:
            raise NoMaps(NO_RECORDS)
        return series.plugin_content, sorted(points, key=lambda datum: datum.step)

    def page_maps(self, run: str, content: bytes, points: list, chosen) -> dict:
        """The maps of the point ``chosen`` of ``points``, as the page reads them, with every step. Raises NoMaps."""
        return {"run": run, "steps": [datum.step for datum in points], **point_maps(content, chosen)}

    def scores(self, run: str, step: int) -> list[dict]:
        """The head-score and ablation grids of ``run`` as logged at or before ``step``; [] when none. They are
        TensorBoard scalars when measured at every validation, this plugin's own scalars when measured once, at
        the end (:func:`~attention_lab.records.probe_summary.end_values_summary`). Raises NoMaps (an
        AnswerTooLarge beyond MAX_ANSWER_CELLS)."""
        budget = CellBudget("this run's scores", self.run_sizes(run))
        return [grid.to_json() for grid in grids_at(self.score_series(run), step, budget.take)]

    def score_series(self, run: str) -> dict[str, list[tuple[int, float]]]:
        """Every head-score and ablation tag of ``run`` of a layer and head its config declares: its (step,
        value) points, sorted by step."""
        sizes = self.run_sizes(run)
        return self.scalar_series(run, lambda tag: (record := parse_tag(tag)) is not None
                                  and sizes.holds(record.layer, record.head))

    def scalar_series(self, run: str, keep: Callable[[str], bool]) -> dict[str, list[tuple[int, float]]]:
        """Every scalar of ``run`` whose tag ``keep`` accepts, from TensorBoard's scalars and this plugin's own (the
        values measured once, at the end): its (step, value) points, sorted by step."""
        series: dict[str, list[tuple[int, float]]] = {}
        for plugin in (scalar_metadata.PLUGIN_NAME, PLUGIN_NAME):
            listing = self.provider.list_scalars(self.ctx, experiment_id=self.experiment, plugin_name=plugin,
                                                 run_tag_filter=data_provider.RunTagFilter(runs=[run]))
            tags = [tag for tag in listing.get(run, {}) if keep(tag)]
            if not tags:
                continue
            self.check_sizes(run)
            read = self.provider.read_scalars(self.ctx, experiment_id=self.experiment, plugin_name=plugin,
                                              run_tag_filter=data_provider.RunTagFilter(runs=[run], tags=tags),
                                              downsample=MAX_POINTS)
            series.update({tag: sorted((d.step, float(d.value)) for d in points)
                           for tag, points in read.get(run, {}).items()})
        return series
