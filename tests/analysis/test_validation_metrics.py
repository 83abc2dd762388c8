"""The scalars of a validation are declared once (analysis/validation_metrics.py): a run logs exactly the declared
ones, ``optimized_metric`` accepts exactly those a run of its config logs, and the docs' table that the knob's help
points to lists them; a scalar added to the declaration is accepted and listed with no other edit, and the module
refuses to run without its value (it logs through the declaration, so a declared scalar cannot go unlogged)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from attention_lab.analysis import validation_metrics
from attention_lab.analysis.tags import is_index_tag
from attention_lab.analysis.validation_metrics import OOD, SPLITS, VAL, ValidationMetric, measured_tags
from attention_lab.checks import check_optimized_metric, validate, variant_of
from attention_lab.config import TrainConfig
from attention_lab.docs_tables import knob_table, validation_metric_table
from attention_lab.errors import ConfigError
from attention_lab.records.metrics_file import per_head
from conftest import compose_config, validated_untrained

SMALL = ["task.train_size=64", "task.val_size=32", "d_model=16", "ablation=[]"]
# A run of each kind of config: the default task alone, and an induction run (its own scalar) with a longer set.
RUNS = {
    "reverse": ("reverse", False, SMALL),
    "induction_with_ood": ("induction", True, [*SMALL, "task=induction", "mask=causal", "task.min_len=4",
                                               "task.max_len=8", "task.ood_min_len=10", "task.ood_max_len=14"]),
}


def scalars(results: list[dict[str, float]]) -> set[str]:
    """The logged names that are neither a head's (or layer's) value nor the loss by target index."""
    return {name for result in results for name in result if not per_head(name) and not is_index_tag(name)}


def every_declared_tag() -> set[str]:
    return {metric.tag(split) for metric in validation_metrics.VALIDATION_METRICS for split in metric.splits}


def every_name_on_every_set() -> set[str]:
    """Each declared name under each split's prefix: ``ood/in_context_score`` too, which no run measures."""
    return {f"{split}/{metric.name}" for metric in validation_metrics.VALIDATION_METRICS for split in SPLITS}


def accepted(overrides: list[str], metric: str) -> bool:
    """Whether the config checks take ``optimized_metric=<metric>`` with these overrides (composed once each)."""
    cfg = compose_config(overrides)
    cfg.optimized_metric = metric
    try:
        check_optimized_metric(cfg, variant_of(cfg))
    except ConfigError:
        return False
    return True


@pytest.mark.parametrize("run", RUNS)
def test_a_validation_logs_exactly_the_declared_scalars_and_the_checks_accept_exactly_those(tmp_path, run):
    task, ood, overrides = RUNS[run]
    _, _, _, results = validated_untrained(overrides, tmp_path, seed=0)
    logged = scalars(results)
    assert logged == set(measured_tags(task, ood=ood))
    assert ({VAL, OOD} if ood else {VAL}) == {name.partition("/")[0] for name in logged}  # both sets, when on
    # optimized_metric: every logged scalar, and no declared one that this run does not log.
    assert {tag for tag in every_name_on_every_set() | logged if accepted(overrides, tag)} == logged


def test_a_trained_run_writes_the_declared_scalars_to_metrics_json(tiny_trained_run):
    """The tiny run (task reverse, no longer set), trained and measured once more by train.py."""
    metrics = json.loads((tiny_trained_run / "metrics.json").read_text())
    final = {name for name in metrics if name.startswith(tuple(f"{split}/" for split in SPLITS))}
    assert scalars([{name: metrics[name] for name in final}]) == set(measured_tags("reverse", ood=False))


def table_tags() -> list[str]:
    """The first column of the generated table of validation metrics."""
    return [row.split("`")[1] for row in validation_metric_table().splitlines()[2:]]


def test_the_knob_help_points_to_the_table_that_lists_the_declared_scalars():
    knob = next(f for f in dataclasses.fields(TrainConfig) if f.name == "optimized_metric")
    assert knob.default in every_declared_tag()
    assert "(#validation-metrics)" in next(row for row in knob_table().splitlines() if row.startswith("| `optimized"))
    assert sorted(table_tags()) == sorted(every_declared_tag())


@pytest.fixture
def one_more_scalar(monkeypatch):
    """The declaration with two new scalars: one of every task and both sets, one of task=copy's validation set."""
    declared = (*validation_metrics.VALIDATION_METRICS, ValidationMetric("new_score", "a new score"),
                ValidationMetric("copy_score", "a score of copying", splits=(VAL,), task="copy"))
    monkeypatch.setattr(validation_metrics, "VALIDATION_METRICS", declared)


def test_a_declared_scalar_is_accepted_and_listed_with_no_other_edit(one_more_scalar):
    assert accepted([], "val/new_score")
    assert accepted(["task=copy"], "val/copy_score")
    assert not accepted([], "val/copy_score")  # another task's runs do not measure it
    assert not accepted([], "ood/new_score")  # no longer set
    assert accepted(["task.ood_min_len=9", "task.ood_max_len=12"], "ood/new_score")
    with pytest.raises(ConfigError, match=r"choose one of [^(]*val/new_score") as refused:
        validate(compose_config(["optimized_metric=val/nope"]))
    assert "copy_score" not in str(refused.value)
    assert {"val/new_score", "ood/new_score", "val/copy_score"} <= set(table_tags())
    assert "| `val/copy_score` | `task=copy` | a score of copying |" in validation_metric_table()


def test_the_module_refuses_a_declared_scalar_it_gives_no_value(tmp_path, one_more_scalar):
    with pytest.raises(KeyError, match="val/new_score is declared"):
        validated_untrained(SMALL, tmp_path, seed=0)
