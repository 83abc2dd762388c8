"""Numbers in names that come from data (job dirs, TensorBoard tags, JSON keys) are ASCII digits: "²" passes
``str.isdigit`` but ``int`` refuses it, and "٣" passes ``str.isdecimal`` and would be job 3 a second time."""

from __future__ import annotations

import json
import shutil

import pytest
from test_compare import write_job

from attention_lab.analysis.tags import (
    COMPOSITIONS,
    HEAD_SCORE_KINDS,
    HeadMetric,
    composition_tag,
    copying_tag,
    index_tag,
    is_index_tag,
    parse_composition_tag,
    parse_copying_tag,
    score_name,
)
from attention_lab.names import natural
from attention_lab.records.files import REFUSED
from attention_lab.review.sweep import natural_key
from attention_lab.run.sweep_summary import job_number, summary_rows

OTHER_DIGITS = ("²", "٣", "①")


@pytest.mark.parametrize(("text", "number"), [("0", 0), ("12", 12), ("007", 7), ("", None), ("-1", None),
                                              ("1.0", None), (" 1", None), *((d, None) for d in OTHER_DIGITS)])
def test_natural_reads_ascii_digits_only(text, number):
    assert natural(text) == number


def test_tags_round_trip_and_other_digits_are_no_tag():
    for kind in COMPOSITIONS:
        assert parse_composition_tag(composition_tag(kind, (0, 3), (1, 12))) == (kind, (0, 3), (1, 12))
    assert parse_copying_tag(copying_tag(2, 5)) == (2, 5)
    kind = HEAD_SCORE_KINDS[0]
    assert HeadMetric.parse(score_name(kind, 1, 3)) == HeadMetric(f"head_score/{kind}", 1, 3)
    assert is_index_tag(index_tag(4))
    for digit in OTHER_DIGITS:
        for tag in (f"attention_entropy/layer{digit}/head0", f"attention_entropy/layer0/head{digit}",
                    f"composition/q/layer0/head{digit}/layer1/head0", f"circuit/copying/layer{digit}/head0"):
            assert HeadMetric.parse(tag) is None and parse_composition_tag(tag) is None
            assert parse_copying_tag(tag) is None
        assert not is_index_tag(index_tag(0).replace("0", digit))
    assert parse_composition_tag("composition/q/layer0/head1/layer1") is None
    assert parse_composition_tag("composition/x/layer0/head1/layer1/head2") is None


def test_natural_order_compares_any_two_names():
    names = ["10", "2", "²", "٣", "a1", "a10", "a2"]
    assert sorted(names, key=natural_key) == ["2", "10", "a1", "a2", "a10", "²", "٣"]


def test_a_job_dir_named_with_other_digits_is_no_job_number(tmp_path):
    sweep = tmp_path / "sweep"
    write_job(sweep, 0, ["heads=1"], run_info={"status": "ok"}, metrics={"val/seq_acc": 1.0})
    (sweep / REFUSED).write_text(json.dumps({"²": {"error": "x"}}))
    for digit in OTHER_DIGITS:
        shutil.copytree(sweep / "0", sweep / digit)
        assert job_number(sweep / digit) is None
    rows = summary_rows(sweep)
    assert sorted(row["output_dir"].rpartition("/")[2] for row in rows) == sorted(["0", *OTHER_DIGITS])
    assert {row["job"] for row in rows} == {0}  # each copy's record says job 0
