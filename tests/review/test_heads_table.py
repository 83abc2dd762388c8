"""compare.py --heads: the heads ranked by a score beside their ablations and patching, and ties reported as ties."""

from __future__ import annotations

from test_compare import write_job

from attention_lab.analysis.tags import PATCHING, ablation_family, score_family, tag
from attention_lab.review.heads_table import heads_markdown, ranked_rows
from attention_lab.review.sweep import collect_sweep

ZERO = ablation_family("zero", "token_acc")
INDUCTION = score_family("induction")
ONE_TOKEN = 1 / 80  # one token of an 80-token validation set


def layer1(scores, zero_drops, restored):
    """metrics.json values of layer 1's three heads (and its whole layer)."""
    metrics = {}
    for head, (score, drop, part) in enumerate(zip(scores, zero_drops, restored, strict=True)):
        metrics |= {tag(INDUCTION, 1, head): score, tag(ZERO, 1, head): drop, tag(PATCHING, 1, head): part}
    return metrics | {tag(ZERO, 1, None): 0.6, tag(PATCHING, 1, None): 0.9}


SEEDS = {
    # the top induction head (h1) is the one whose zeroing costs the most, and patching it restores the most
    0: layer1([0.5, 0.9, 0.7], [0.0, 2 * ONE_TOKEN, ONE_TOKEN], [0.1, 0.5, 0.2]),
    # the top head (h0) and h2 cost exactly one token each: a tie, not an agreement
    1: layer1([0.9, 0.5, 0.7], [ONE_TOKEN, 0.0, ONE_TOKEN], [0.4, 0.1, 0.3]),
    # the top head (h2) costs less than h0; patching h2 restores the most
    2: layer1([0.5, 0.7, 0.9], [2 * ONE_TOKEN, 0.0, ONE_TOKEN], [0.1, 0.2, 0.6]),
}


def sweep_of(tmp_path):
    sweep = tmp_path / "sweep"
    for job, (seed, metrics) in enumerate(SEEDS.items()):
        write_job(sweep, job, ["experiment=induction_heads", f"seed={seed}"], run_info={"status": "ok"},
                  metrics={"val/seq_acc": 1.0, **metrics})
    return collect_sweep(sweep)


def test_a_tie_for_the_largest_cost_is_reported_as_a_tie(tmp_path):
    rows = ranked_rows(sweep_of(tmp_path), ["induction"])
    top = next(row for row in rows if row.layer == 1 and row.rank == 1)
    zero, patching = top.agreements["most needed (zero ablation)"], top.agreements["restores most (patching)"]
    assert (zero.agree, zero.seeds, zero.ties) == (1, 3, ["seed 1: h0, h2"])
    assert (patching.agree, patching.seeds, patching.ties) == (3, 3, [])
    # the rank-1 head of each seed: h1, h0, h2
    assert top.values[PATCHING] == [0.5, 0.4, 0.6]
    whole = next(row for row in rows if row.layer == 1 and row.rank is None)
    assert whole.values[PATCHING] == [0.9, 0.9, 0.9]


def test_the_markdown_shows_patching_and_the_tie(tmp_path):
    table = heads_markdown(sweep_of(tmp_path), ["induction"])
    assert "patching: logit diff restored" in table.splitlines()[0]
    top = next(line for line in table.splitlines() if "#1 by induction" in line)
    assert top.endswith("| 0.50 ± 0.10 | 1/3 seeds; tie: seed 1: h0, h2 | 3/3 seeds |")
