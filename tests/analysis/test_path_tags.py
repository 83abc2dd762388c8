"""The path patching tags read back (analysis/tags.py's PathTag, path_grid): every tag the library writes parses to
its sender, receiver and input, other names do not, and the grid puts each value in its sender's row and its
receiver input's column."""

from __future__ import annotations

import math

import pytest

from attention_lab.analysis.path_patching import path_tag
from attention_lab.analysis.tags import HeadMetric, PathTag, path_grid
from attention_lab.records.metrics_file import per_head


@pytest.mark.parametrize(("sender", "receiver", "kind"), [((0, 0), (1, 3), "q"), ((2, 11), (10, 0), "v"),
                                                          ((1, 2), None, "logits")])
def test_the_library_tags_parse_to_their_parts_and_back(sender, receiver, kind):
    written = path_tag(sender, receiver, kind) if receiver else path_tag(sender)
    assert PathTag.parse(written) == PathTag(sender, receiver, kind)
    assert PathTag(sender, receiver, kind).tag == written
    assert HeadMetric.parse(written) is None and per_head(written)  # metrics.json: with the per-head values


@pytest.mark.parametrize("name", [
    "patching/logit_diff/layer0/head1", "path_patching/logit_diff/layer0/head1",
    "path_patching/logit_diff/layer0/head1/layer1/head0", "path_patching/logit_diff/layer0/head1/layer1/head0/o",
    "path_patching/logit_diff/layer0/head1/layer1/head0/q/x", "path_patching/logit_diff/layer0/head1/logits/q",
    "path_patching/logit_diff/layer0/headx/logits", "path_patching/logit_diff/layer²/head1/logits",
    "path_patching/other/layer0/head1/logits"])
def test_other_names_are_not_path_tags(name):
    assert PathTag.parse(name) is None


def test_the_grid_has_a_row_per_sender_and_a_column_per_receiver_input_logits_last():
    metrics = {path_tag((0, 1), (2, 0), "k"): 0.5, path_tag((0, 1), (1, 1), "v"): 0.25,
               path_tag((0, 1), (1, 1), "q"): -0.5, path_tag((1, 0), (2, 0), "k"): 2.0,
               path_tag((1, 0)): 0.75, path_tag((0, 1)): 1.0, "val/loss": 3.0, "patching/logit_diff/layer0/head1": 9.0}
    senders, columns, cells = path_grid(metrics)
    assert senders == [(0, 1), (1, 0)]
    assert columns == [((1, 1), "q"), ((1, 1), "v"), ((2, 0), "k"), (None, "logits")]
    nan = math.nan
    assert cells == [pytest.approx(row, nan_ok=True) for row in [[-0.5, 0.25, 0.5, 1.0], [nan, nan, 2.0, 0.75]]]
    assert path_grid({"val/loss": 1.0}) is None
