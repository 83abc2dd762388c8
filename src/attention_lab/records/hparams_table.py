"""TensorBoard's HParams table: which columns a run declares, and in which order the table opens on them: the
settings that tell runs apart (``run``, ``seed`` and what the run's sweep varies), then the outcomes
(``hp/steps_to_solve``, the run's ``optimized_metric``, the other final metrics), then the knobs its runs share.

How TensorBoard orders them (2.x, its hparams plugin): the table takes its columns from the experiment summary of
the first run it reads; its backend sorts that experiment's hparams by ``differs`` (true first), then by name; its
dashboard ticks the first five hparams and the first five metrics, in that order, and leaves the others behind
their checkboxes. With no ``differs`` (neither TensorBoard's ``hparams_config`` nor torch's ``hparams``, which
Lightning's logger calls, set it), the table opened on ``batch_size``, ``block``, ``d_model``, ``dropout`` and
``heads``, and ``seed`` and ``hp/steps_to_solve`` were hidden. So the experiment summary is written here with the
plugin's own protos (:mod:`tensorboard.plugins.hparams.api_pb2`, whose ``HParamInfo.differs`` is public), the
columns that tell runs apart marked ``differs``, the metrics listed outcomes first. Within each part the backend's
order (by name) stands; metrics always come after the hparams (the dashboard's layout).

Every run declares every knob: TensorBoard takes the columns from the first run it reads, so over a logdir of runs
and sweeps, every knob must be there. A run that never solved declares ``hp/steps_to_solve`` all the same (its cell
is empty): the first run read may be one that never solved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from omegaconf import DictConfig, OmegaConf
from tensorboard.compat.proto import summary_pb2
from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

from attention_lab.analysis.tags import is_index_tag
from attention_lab.config import Mask, Position
from attention_lab.records.metrics_file import STEPS_TO_SOLVE

if TYPE_CHECKING:
    from lightning.pytorch.loggers import TensorBoardLogger

SEED = "seed"
RUN = "run"  # the column of the run's name (its overrides): the Trial ID is its path, which the table cuts short
Value = bool | int | float | str


def hparams_for_dashboard(cfg: DictConfig) -> dict[str, Any]:
    """Every knob a sweep may vary, flat: metrics.json's "hparams"."""
    model = cfg.model
    return {
        "model": model.name, "mixers": ",".join(str(name) for name in model.mixers) if model.get("mixers") else "",
        "heads": model.num_heads, "kv_heads": model.kv_heads or model.num_heads,
        "d_model": model.d_model, "layers": model.layers, "mask": Mask(model.mask).value,
        "window": model.window or 0, "position": Position(model.position).value,
        "block": model.block.name, "task": cfg.task.name, "lr": cfg.lr,
        "batch_size": cfg.batch_size, "dropout": model.dropout, "seed": cfg.seed,
    }


def shown_hparams(cfg: DictConfig, keys: tuple[str, ...], name: str = "") -> dict[str, Value]:
    """TensorBoard's HParams columns: ``run``, the run's name, every knob, and the settings ``keys`` a sweep job's
    sweep varies beyond them, as they took effect (``heads`` of a single-head variant: 1)."""
    shown: dict[str, Value] = {RUN: name or "(defaults)", **hparams_for_dashboard(cfg)}
    for key in keys:
        if key not in shown:
            value = OmegaConf.select(cfg, key)
            value = getattr(value, "value", value)  # an enum
            shown[key] = value if isinstance(value, (bool, int, float, str)) else str(value)
    return shown


def tag(metric: str) -> str:
    """The HParams metric of ``metric``: ``hp/<metric>``, "/" written "_" (``hp/val_seq_acc``)."""
    return f"hp/{metric.replace('/', '_')}"


def outcomes(metrics: dict[str, Any], optimized_metric: str) -> list[str]:
    """The metrics the table shows, outcomes first: steps_to_solve, the optimized metric, the other final val/*
    and ood/* (the per-index ones left out)."""
    finals = [key for key in metrics if key.startswith(("val/", "ood/")) and not is_index_tag(key)]
    return list(dict.fromkeys([STEPS_TO_SOLVE, optimized_metric, *finals]))


def hparams_metrics(metrics: dict[str, Any], optimized_metric: str) -> dict[str, float]:
    """TensorBoard's HParams metric values, outcomes first (:func:`outcomes`); one never measured (a run that
    never solved) is left out, not given a placeholder."""
    return {tag(key): metrics[key] for key in outcomes(metrics, optimized_metric)
            if isinstance(metrics.get(key), (int, float)) and not isinstance(metrics.get(key), bool)}


@dataclass(frozen=True)
class HParamsTable:
    """A run's row of the HParams table and the columns it declares."""

    values: dict[str, Value]  # every column's value
    varied: tuple[str, ...]  # the columns that tell runs apart (declared ``differs``: the table opens on them)
    metrics: dict[str, float]  # the measured outcomes, by tag
    declared: tuple[str, ...]  # every metric column, by tag, outcomes first


def hparams_table(cfg: DictConfig, swept: tuple[str, ...], name: str, metrics: dict[str, Any]) -> HParamsTable:
    """The run's HParams row: ``swept`` are the settings its sweep varies (a single run: none)."""
    values = shown_hparams(cfg, swept, name)
    varied = tuple(key for key in values if key in (RUN, SEED, *swept))
    optimized = str(cfg.optimized_metric)
    return HParamsTable(values, varied, hparams_metrics(metrics, optimized),
                        tuple(tag(key) for key in outcomes(metrics, optimized)))


def hparam_info(name: str, value: Value, differs: bool) -> api_pb2.HParamInfo:
    kind = (api_pb2.DATA_TYPE_BOOL if isinstance(value, bool) else
            api_pb2.DATA_TYPE_FLOAT64 if isinstance(value, (int, float)) else api_pb2.DATA_TYPE_STRING)
    return api_pb2.HParamInfo(name=name, type=kind, differs=differs)


def summary(tag_name: str, data: plugin_data_pb2.HParamsPluginData) -> summary_pb2.Summary:
    """One summary of the hparams plugin, as its own summary functions write one."""
    return summary_pb2.Summary(value=[summary_pb2.Summary.Value(
        tag=tag_name, metadata=metadata.create_summary_metadata(data), tensor=metadata.NULL_TENSOR)])


def summaries(table: HParamsTable) -> list[summary_pb2.Summary]:
    """The experiment (the columns, in order), the session's start (the run's values) and its end (success). The
    session has no group name: each run is its own row, as torch's summaries make it."""
    experiment = api_pb2.Experiment(
        hparam_infos=[hparam_info(name, value, name in table.varied) for name, value in table.values.items()],
        metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=name)) for name in table.declared])
    start = plugin_data_pb2.SessionStartInfo()
    for name, value in table.values.items():
        if isinstance(value, bool):
            start.hparams[name].bool_value = value
        elif isinstance(value, (int, float)):
            start.hparams[name].number_value = value
        else:
            start.hparams[name].string_value = str(value)
    end = plugin_data_pb2.SessionEndInfo(status=api_pb2.STATUS_SUCCESS)
    return [summary(metadata.EXPERIMENT_TAG, plugin_data_pb2.HParamsPluginData(experiment=experiment)),
            summary(metadata.SESSION_START_INFO_TAG, plugin_data_pb2.HParamsPluginData(session_start_info=start)),
            summary(metadata.SESSION_END_INFO_TAG, plugin_data_pb2.HParamsPluginData(session_end_info=end))]


def write_table(logger: TensorBoardLogger, table: HParamsTable, step: int) -> None:
    """Into Lightning's TensorBoard ``logger``: the values as its hparams (its ``hparams.yaml``; an empty metrics
    dict writes no summary of its own, not even its ``hp_metric`` placeholder), the outcomes as scalars (the
    table's metric cells read their last value) and the plugin's summaries."""
    logger.log_hyperparams(table.values, metrics={})
    logger.log_metrics(table.metrics, step=step)
    writer = logger.experiment.file_writer  # torch's SummaryWriter's event file (its add_hparams writes there too)
    for written in summaries(table):
        writer.add_summary(written, step)
