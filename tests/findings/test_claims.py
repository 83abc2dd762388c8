"""The claim kinds of attention_lab.findings against hand-written records: each held and not held, with the numbers
that decided it (the expected verdicts worked out by hand from the records below)."""

from __future__ import annotations

import pytest

from attention_lab.findings.claims import KOfN, Order, Predicate, Range, Record


def job(seed: int, metrics: dict, **overrides: str) -> Record:
    return Record({**overrides, "seed": str(seed)}, metrics)


SOLVED = [job(s, {"steps_to_solve": 150.0 + 10 * s, "acc": 0.9 + s / 100}, smeared_keys="True") for s in range(4)]
UNSOLVED = [job(s, {"steps_to_solve": None, "acc": 0.5 + s / 100}, smeared_keys="False") for s in range(4)]


def test_k_of_n_held_and_not_held():
    every = KOfN(Predicate("steps_to_solve", "set"), 4, 4, {"smeared_keys": "true"})  # "true" matches Hydra's "True"
    assert every.evaluate(SOLVED + UNSOLVED).held
    none = KOfN(Predicate("steps_to_solve", "set"), 4, 4, {"smeared_keys": "false"})
    verdict = none.evaluate(SOLVED + UNSOLVED)
    assert not verdict.held
    assert verdict.numbers.startswith("0 of 4 (needed 4); not: seed 0: null, seed 1: null")
    assert verdict.seeds == ("0", "1", "2", "3")


def test_k_of_n_asks_the_same_share_of_another_number_of_seeds():
    at_least_half = KOfN(Predicate("acc", ">=", 0.92), 5, 10)  # 5 of 10 -> 2 of the 4 records here
    assert at_least_half.evaluate(SOLVED).held  # seeds 2, 3: 0.92, 0.93
    assert "2 of 4 (needed 2)" in at_least_half.evaluate(SOLVED).numbers
    three_quarters = KOfN(Predicate("acc", ">=", 0.92), 3, 4)
    assert not three_quarters.evaluate(SOLVED).held
    assert not KOfN(Predicate("acc", ">", 0), 1, 1, {"model": "mla"}).evaluate(SOLVED).held  # no job: nothing held


def test_a_test_of_a_missing_or_null_metric_fails_a_comparison():
    assert not Predicate("acc", ">=", 0).passes(job(0, {}))
    assert Predicate("steps_to_solve", "unset").passes(job(0, {}))
    with pytest.raises(ValueError):
        Predicate("acc", ">=")


def positions(values: dict[str, list[float]]) -> list[Record]:
    return [job(seed, {"ood": v}, position=name) for name, per_seed in values.items() for seed, v in enumerate(per_seed)]


ORDER = Order("ood", (("rope",), ("alibi",), ("none", "sinusoidal"), ("learned",)), 2, 2, by="position")


def test_order_held_with_a_tie_left_open():
    records = positions({"rope": [1.0, 0.99], "alibi": [0.6, 0.7], "none": [0.2, 0.17], "sinusoidal": [0.18, 0.19],
                         "learned": [0.01, 0.02]})
    verdict = ORDER.evaluate(records)
    assert verdict.held and verdict.numbers == "in 2 of 2 seeds (needed 2)"


def test_order_not_held_names_the_seed_that_broke_it():
    records = positions({"rope": [1.0, 0.99], "alibi": [0.6, 0.15], "none": [0.2, 0.17], "sinusoidal": [0.18, 0.19],
                         "learned": [0.01, 0.02]})
    verdict = ORDER.evaluate(records)
    assert not verdict.held
    assert verdict.numbers == "in 1 of 2 seeds (needed 2); not: seed 1: 0.99 / 0.15 / 0.17,0.19 / 0.02"


def test_order_by_configurations_of_several_overrides():
    sinks = {"plain": {"model": "multihead", "sink": None}, "sink": {"sink": "zero"}}
    order = Order("first", (("plain",), ("sink",)), 1, 1, configurations=sinks)
    records = [job(0, {"first": 0.2}, model="multihead"), job(0, {"first": 0.1}, model="multihead", sink="zero")]
    assert order.evaluate(records).held
    records[1] = job(0, {"first": 0.3}, model="multihead", sink="zero")
    assert not order.evaluate(records).held


def test_range_held_at_the_precision_its_bounds_are_written_in():
    claim = Range("acc", 0.61, 0.69, (0, 1))
    assert claim.evaluate([job(0, {"acc": 0.6149}), job(1, {"acc": 0.6949})]).held  # 0.61 and 0.69 as written
    verdict = claim.evaluate([job(0, {"acc": 0.6149}), job(1, {"acc": 0.6049})])
    assert not verdict.held
    assert verdict.numbers == "0.6049 to 0.6149 over 2 jobs; outside: seed 1: 0.6049"


def test_range_not_held_on_a_missing_value():
    claim = Range("steps_to_solve", 130, 170, (0,), {"smeared_keys": "false"})
    verdict = claim.evaluate(UNSOLVED[:1])
    assert not verdict.held and verdict.numbers == "no value over 1 jobs; outside: seed 0: null"
    assert str(claim) == "smeared_keys=false: steps_to_solve in 130 to 170 (seeds 0)"


def test_a_range_where_set_leaves_the_unset_jobs_out_but_not_an_empty_choice():
    claim = Range("steps_to_solve", 150, 170, (0, 1), where_set=True)
    verdict = claim.evaluate(SOLVED[:2] + UNSOLVED)  # 150, 160 and four nulls
    assert verdict.held and verdict.numbers == "150 to 160 over 2 jobs"
    assert str(claim) == "every job: steps_to_solve in 150 to 170 (seeds 0,1, where set)"
    assert not claim.evaluate(SOLVED[3:]).held  # 180 is out ...
    assert not claim.evaluate(UNSOLVED).held  # ... and no job with a number holds nothing either
    assert not Range("steps_to_solve", 150, 170, (0, 1)).evaluate(SOLVED[:2] + UNSOLVED).held


def test_an_order_names_its_configurations_one_way():
    with pytest.raises(ValueError):
        Order("first", (("plain",),), 1, 1)  # neither by= nor configurations=
    with pytest.raises(ValueError):
        Order("first", (("plain",), ("other",)), 1, 1, configurations={"plain": {}})  # "other" is no configuration
