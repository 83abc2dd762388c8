"""A budget ladder's plan (attention_lab.run.ladder), on fabricated results: which cells go on, with which search
values, at which budget and under which job numbers; and its settings refused in one line each."""

from __future__ import annotations

import math

import pytest

from attention_lab.errors import ConfigError
from attention_lab.run.ladder import cells_of, check_ladder, first_rung, ladder_record, next_rung

LRS = ["1e-4", "3e-4", "1e-3"]
PRODUCT = [[f"model={m}", f"lr={lr}", "seed=1"] for m in ("self", "multihead") for lr in LRS]


def planned(keep=(None, 2, 1), rungs=(500, 2000, 6000)):
    search, rungs, keep = check_ladder("lr", list(rungs), list(keep), "maximize", PRODUCT)
    cells = cells_of(PRODUCT, search)
    return cells, first_rung(cells, search, rungs), rungs, keep


def results(jobs, metrics, solved=()):
    for job, metric in zip(jobs, metrics, strict=True):
        job.metric, job.steps_to_solve = metric, (400 if job.num in solved else None)


def test_rung_0_is_the_whole_product_and_each_cell_its_search_values():
    cells, jobs, _, _ = planned()
    assert [cell.overrides for cell in cells] == [["model=self", "seed=1"], ["model=multihead", "seed=1"]]
    assert [cell.values for cell in cells] == [LRS, LRS]
    assert [(job.num, job.value, job.max_steps) for job in jobs] == [(n, lr, 500) for n, lr in enumerate(LRS * 2)]
    assert jobs[4].overrides == ["model=multihead", "seed=1", "lr=3e-4", "max_steps=500"]


def test_solved_cells_stop_and_unsolved_ones_keep_their_best_values_numbered_on():
    cells, jobs, rungs, keep = planned()
    results(jobs, [0.2, 0.9, 0.5, 0.1, 0.3, 0.7], solved={1})  # model=self solved by lr=3e-4
    second = next_rung(cells, "lr", rungs, keep, 0, 6, "maximize")
    assert [(job.num, job.rung, job.value, job.max_steps) for job in second] == [(6, 1, "1e-3", 2000),
                                                                                 (7, 1, "3e-4", 2000)]
    assert second[0].overrides == ["model=multihead", "seed=1", "lr=1e-3", "max_steps=2000"]
    assert cells[0].solved and not cells[1].solved and len(cells[1].jobs) == 5
    results(second, [0.4, 0.6])
    third = next_rung(cells, "lr", rungs, keep, 1, 8, "maximize")  # the best of rung 1 only, not of all rungs
    assert [(job.num, job.value, job.max_steps) for job in third] == [(8, "3e-4", 6000)]
    results(third, [1.0], solved={8})
    assert next_rung(cells, "lr", rungs, keep, 2, 9, "maximize") == []
    record = ladder_record("lr", rungs, keep, cells, 3, "val/token_acc", "maximize")
    assert record["cells"][1]["solved"] and [j["job"] for j in record["cells"][1]["jobs"]] == [3, 4, 5, 6, 7, 8]
    assert record["cells"][0]["jobs"][1] == {"job": 1, "rung": 0, "search_value": "3e-4", "max_steps": 500,
                                             "steps_to_solve": 400, "metric": 0.9}


def test_ties_go_to_the_value_listed_first_and_a_missing_metric_ranks_last():
    cells, jobs, rungs, keep = planned(keep=(None, 2, 1))
    results(jobs, [0.5, 0.5, 0.5, None, math.nan, 0.0])
    second = next_rung(cells, "lr", rungs, keep, 0, 6, "maximize")
    assert [(job.num, job.value) for job in second] == [(6, "1e-4"), (7, "3e-4"), (8, "1e-3"), (9, "1e-4")]


def test_minimize_carries_the_lowest_metric():
    cells, jobs, rungs, keep = planned()
    results(jobs, [2.5, 0.9, 3.1, 4.0, 2.2, 2.9])  # a loss: model=self's best is 3e-4 then 1e-4
    second = next_rung(cells, "lr", rungs, keep, 0, 6, "minimize")
    assert [(job.num, job.value) for job in second] == [(6, "3e-4"), (7, "1e-4"), (8, "3e-4"), (9, "1e-3")]
    results(second, [1.4, 0.8, math.nan, 2.0])  # a NaN loss ranks last, as a NaN accuracy does
    third = next_rung(cells, "lr", rungs, keep, 1, 10, "minimize")
    assert [(job.num, job.value) for job in third] == [(10, "1e-4"), (11, "1e-3")]
    assert ladder_record("lr", rungs, keep, cells, 2, "val/loss", "minimize")["direction"] == "minimize"


def test_all_solved_in_rung_0_ends_the_ladder():
    cells, jobs, rungs, keep = planned()
    results(jobs, [0.0] * 6, solved={0, 5})
    assert next_rung(cells, "lr", rungs, keep, 0, 6, "maximize") == []


@pytest.mark.parametrize(("search", "rungs", "keep", "words"), [
    ("wd", [500, 2000], [None, 1], "hydra.sweeper.search=wd is invalid: it must be one of the sweep's params"),
    ("lr", [500, 500], [None, 1], "hydra.sweeper.rungs=[500, 500] is invalid"),
    ("lr", [0, 500], [None, 1], "hydra.sweeper.rungs=[0, 500] is invalid"),
    ("lr", [], [], "hydra.sweeper.rungs=[] is invalid"),
    ("lr", [500, 2000], [None], "hydra.sweeper.keep=[None] is invalid: it must have one entry per rung"),
    ("lr", [500, 2000], [None, 0], "hydra.sweeper.keep=[None, 0] is invalid: each rung keeps at least 1"),
    ("lr", [500, 2000, 6000], [None, 1, 2], "hydra.sweeper.keep=[None, 1, 2] is invalid"),
    ("lr", [500, 2000], [2, 1], "hydra.sweeper.keep=[2, 1] is invalid: rung 0 runs every one of a cell's 3 lr"),
])
def test_bad_ladder_settings_are_refused_in_one_line(search, rungs, keep, words):
    with pytest.raises(ConfigError) as refused:
        check_ladder(search, rungs, keep, "maximize", PRODUCT)
    assert str(refused.value).startswith(words) and "\n" not in str(refused.value)


def test_a_sweep_that_sets_max_steps_is_refused():
    with pytest.raises(ConfigError, match=r"^max_steps is invalid in a ladder sweep: the ladder sets it per rung"):
        check_ladder("lr", [500, 2000], [None, 1], "maximize", [[*job, "max_steps=300"] for job in PRODUCT])


def test_a_direction_other_than_maximize_or_minimize_is_refused():
    with pytest.raises(ConfigError, match=r"^hydra.sweeper.direction=max is invalid: it must be one of maximize, "
                                          r"minimize, the way the optimized metric ranks a cell's search values$"):
        check_ladder("lr", [500, 2000], [None, 1], "max", PRODUCT)
