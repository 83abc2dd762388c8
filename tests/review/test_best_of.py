"""--best-of: a setting swept only to pick its best value per cell (Zoology's best of four learning rates), and
--x state_size: the recurrent state each job recorded. On a synthetic sweep as train.py -m leaves it."""

from __future__ import annotations

import pytest
from test_compare import sample_mean_std, write_job

from attention_lab.review.best_of import best_of
from attention_lab.review.lines import series, to_markdown
from attention_lab.review.sweep import collect_sweep, seed_groups
from conftest import ROOT, run_in_process

PLOT = ROOT / "scripts" / "plot_sweep.py"
RATES = ("0.001", "0.003", "0.01", "0.03")
ACCURACY = {  # (model, d_model, lr) -> token accuracy of seeds 0 and 1
    ("multihead", 16, "0.001"): [0.2, 0.3], ("multihead", 16, "0.003"): [0.9, 0.7],
    ("multihead", 16, "0.01"): [1.0, 0.4], ("multihead", 16, "0.03"): [0.1, 0.1],  # 0.003 (0.8) beats 0.01 (0.7)
    ("multihead", 64, "0.001"): [1.0, 1.0], ("multihead", 64, "0.003"): [1.0, 1.0],  # a tie: the first listed
    ("multihead", 64, "0.01"): [0.5, 0.5], ("multihead", 64, "0.03"): [],  # both seeds failed
    ("linear", 16, "0.001"): [0.1, 0.1], ("linear", 16, "0.003"): [0.2, 0.3],
    ("linear", 16, "0.01"): [0.25], ("linear", 16, "0.03"): [0.6, 0.4],  # 0.01: seed 1 failed
    ("linear", 64, "0.001"): [], ("linear", 64, "0.003"): [],
    ("linear", 64, "0.01"): [], ("linear", 64, "0.03"): [],  # the whole cell failed
}
STATE = {("multihead", 16): 1024, ("multihead", 64): 4096, ("linear", 16): 272, ("linear", 64): 4160}
BEST = {("multihead", 16): "0.003", ("multihead", 64): "0.001", ("linear", 16): "0.03"}
# The rates the seeds do not separate from the best mean (means closer than the larger std, or one seed), by hand:
# 0.8 ± 0.14 and 0.7 ± 0.42; 1.0 ± 0 twice; 0.5 ± 0.14 and 0.25 from one seed.
RIVALS = {("multihead", 16): ("0.01", 2), ("multihead", 64): ("0.003", 2), ("linear", 16): ("0.01", 1)}
NOTES = {("multihead", 16): "lr=0.003, highest mean of 4, not separated from lr=0.01 by 2 seeds",
         ("multihead", 64): "lr=0.001, highest mean of 3, not separated from lr=0.003 by 2 seeds",
         ("linear", 16): "lr=0.03, highest mean of 4, not separated from lr=0.01 by 1 seed"}


@pytest.fixture
def lr_sweep(tmp_path):
    """`train.py -m model=multihead,linear d_model=16,64 lr=... seed=0,1`, as the sweep leaves it."""
    sweep, job = tmp_path / "sweep", 0
    for (model, width, lr), values in ACCURACY.items():
        for seed in range(2):
            overrides = [f"model={model}", f"d_model={width}", f"lr={lr}", f"seed={seed}"]
            if seed < len(values):
                write_job(sweep, job, overrides, run_info={"status": "ok", "wall_time_s": 1.0},
                          metrics={"val/token_acc": values[seed], "global_step": 10,
                                   "state_size": STATE[model, width]})
            else:
                write_job(sweep, job, overrides, run_info={"status": "failed", "error": "diverged"})
            job += 1
    return sweep


def test_each_cell_keeps_the_learning_rate_with_the_best_mean(lr_sweep):
    cells = best_of(seed_groups(collect_sweep(lr_sweep)), "lr", "val/token_acc")
    assert len(cells) == 4
    found = {}
    for cell in cells:
        model, width = (next(o.split("=")[1] for o in cell.group.overrides if o.startswith(k)) for k in ("model", "d_"))
        found[model, int(width)] = (cell.winner, cell.tried, cell.values)
    assert found == {("multihead", 16): ("0.003", 4, 4), ("multihead", 64): ("0.001", 3, 4),
                     ("linear", 16): ("0.03", 4, 4), ("linear", 64): (None, 0, 4)}
    rivals = {key: (cell.rivals, cell.seeds) for cell in cells for key in found if cell.winner == found[key][0]}
    assert all(rivals[key] == ([value], seeds) for key, (value, seeds) in RIVALS.items())


def test_minimizing_keeps_the_lowest_mean():
    from attention_lab.review.sweep import Group, Job
    groups = [Group(f"lr={lr}", ["model=m", f"lr={lr}"], [Job("0", ROOT, [], status="ok", metrics={"val/loss": loss})])
              for lr, loss in (("0.1", 2.0), ("0.2", 0.5), ("0.3", 1.0))]
    assert best_of(groups, "lr", "val/loss", "minimize")[0].winner == "0.2"
    assert best_of(groups, "lr", "val/loss", "maximize")[0].winner == "0.1"


@pytest.mark.parametrize("x", ["d_model", "state_size"])
def test_points_are_the_best_cells_seed_means_against_width_or_state(lr_sweep, x):
    lines = series(collect_sweep(lr_sweep), x, "model", "val/token_acc", best="lr")
    assert set(lines) == {"multihead", "linear"}
    for model, points in lines.items():
        widths = [w for w in (16, 64) if (model, w) in BEST]
        assert [p.x for p in points] == [float(STATE[model, w] if x == "state_size" else w) for w in widths]
        for point, width in zip(points, widths, strict=True):
            values = ACCURACY[model, width, BEST[model, width]]
            mean, std = sample_mean_std(values)
            assert (point.mean, point.std, point.n) == (pytest.approx(mean), pytest.approx(std), len(values))
            assert point.note == NOTES[model, width]
    assert NOTES["multihead", 16] in to_markdown(lines, x, "model", "val/token_acc")


def test_the_script_names_the_winning_rate_in_its_table(lr_sweep, tmp_path):
    out = tmp_path / "out"
    run_in_process(PLOT, str(lr_sweep), "--best-of", "lr", "--x", "state_size", "--out", str(out), check=True)
    table = (out / "val_token_acc_vs_state_size.md").read_text()
    assert f"0.800 ± 0.141 (n=2, {NOTES['multihead', 16]})" in table and (out / "val_token_acc_vs_state_size.png").is_file()


def test_best_of_a_setting_the_sweep_does_not_vary_is_one_line(lr_sweep):
    proc = run_in_process(PLOT, str(lr_sweep), "--best-of", "batch_size")
    assert proc.returncode == 1 and proc.stderr.startswith("error: batch_size is not a setting")
    assert proc.stderr.count("\n") == 1


def test_compare_folds_the_setting_into_one_row_per_cell(lr_sweep):
    from attention_lab.review.best_of import best_markdown, best_rows

    sweep = collect_sweep(lr_sweep, metric="val/token_acc")
    cells = best_of(seed_groups(sweep), "lr", sweep.metric, sweep.direction)
    header, rows = best_rows(sweep, cells, "lr")
    assert header[:4] == ["cell", "lr", "tried", "seeds"]
    by_cell = {row[0]: row for row in rows}
    assert set(by_cell) == {"model=multihead d_model=16", "model=multihead d_model=64", "model=linear d_model=16",
                            "model=linear d_model=64"}
    assert by_cell["model=multihead d_model=16"][1:3] == ["0.003 (not separated from 0.01)", "4 of 4"]
    assert by_cell["model=multihead d_model=64"][1:3] == ["0.001 (not separated from 0.003)", "3 of 4"]
    assert by_cell["model=linear d_model=64"][1:3] == ["—", "0 of 4"]  # no ok job: no winner, said so
    mean, std = sample_mean_std(ACCURACY["multihead", 16, "0.003"])
    assert f"{mean:.4f} ± {std:.4f} (n=2)" in by_cell["model=multihead d_model=16"]
    assert best_markdown(sweep, cells, "lr").startswith("## Best of `lr`")


def test_compare_script_writes_the_folded_table(lr_sweep, tmp_path):
    out = tmp_path / "out"
    proc = run_in_process(ROOT / "scripts" / "compare.py", str(lr_sweep), "--best-of", "lr", "--metric",
                          "val/token_acc", "--out", str(out), check=True)
    assert "| `model=linear d_model=16` | 0.03 (not separated from 0.01) | 4 of 4 |" in (
        out / "compare_best_of.md").read_text()
    assert "compare_best_of.md" in proc.stdout
    refused = run_in_process(ROOT / "scripts" / "compare.py", str(lr_sweep), "--best-of", "heads", "--out", str(out))
    assert refused.returncode == 1 and refused.stderr.startswith("error: heads is not a setting")
