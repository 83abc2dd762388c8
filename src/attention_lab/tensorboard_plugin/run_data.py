"""A run's records as the tab shows them, read through TensorBoard's data provider (so both of its loaders
serve them): the runs, the probe's maps at a step, and the head scores and ablation drops of that step."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from tensorboard.data import provider as data_provider
from tensorboard.plugins.scalar import metadata as scalar_metadata

from attention_lab.review.colour_scale import colour_scale
from attention_lab.tensorboard_plugin.declared import DeclaredSizes, RunOutside
from attention_lab.tensorboard_plugin.limits import weights_for_page
from attention_lab.tensorboard_plugin.run_names import run_label
from attention_lab.tensorboard_plugin.scores import grids_at, parse_tag
from attention_lab.tensorboard_plugin.summary import PLUGIN_NAME, PROBE_TAG, RecordError, WordLayout, check_weights

MAX_POINTS = 1_000_000  # ask the provider for every point it holds (what it keeps is TensorBoard's sampling)

NO_RECORDS = ("no attention records in this run: it was trained before the attention tab existed, or without "
              "callbacks.attention_summaries. The sentence box still works when the run has a checkpoint.")


class NoMaps(Exception):
    """Why a run has no maps to show (``reason`` is the line the tab prints)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


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
        with every logged step. Raises NoMaps."""
        content, points = self.probe_points(run)
        chosen = points[-1] if step is None else next((d for d in reversed(points) if d.step <= step), points[0])
        return self.page_maps(run, content, points, chosen)

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
        """The maps of the point ``chosen`` of ``points``, as the page reads them. Raises NoMaps."""
        steps = [datum.step for datum in points]
        try:
            layout = WordLayout.from_content(content)
            weights = check_weights(chosen.numpy, layout)
        except RecordError as err:
            raise NoMaps(f"the attention record of this run cannot be read ({err.field}: {err.problem}); "
                         "it was written by another version of attention-lab") from None
        if weights.shape[0] == 0 or weights.shape[1] == 0:
            raise NoMaps("this run's model has no attention heads to show")
        return {"run": run, "steps": steps, "step": chosen.step, "query_words": layout.query_words,
                "key_words": layout.key_words, "query_axis": layout.query_axis,
                "weights": weights_for_page(weights),
                "scale": colour_scale(layout.kinds, float(np.abs(weights).max())).as_dict()}

    def scores(self, run: str, step: int) -> list[dict]:
        """The head-score and ablation grids of ``run`` as logged at or before ``step``; [] when none. They are
        TensorBoard scalars when measured at every validation, this plugin's own scalars when measured once, at
        the end (:func:`~attention_lab.tensorboard_plugin.summary.end_values_summary`)."""
        return [grid.to_json() for grid in grids_at(self.score_series(run), step)]

    def score_series(self, run: str) -> dict[str, list[tuple[int, float]]]:
        """Every head-score and ablation tag of ``run``: its (step, value) points, sorted by step."""
        return self.scalar_series(run, lambda tag: parse_tag(tag) is not None)

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
