"""scripts/plot_sweep.py: a metric against a swept setting, one line per value of another, error bars over seeds."""

from __future__ import annotations

import json

import pytest
from PIL import Image
from test_compare import sample_mean_std, write_job

from attention_lab.review.lines import series
from attention_lab.review.sweep import collect_sweep
from conftest import ROOT, run_in_process

PLOT = ROOT / "scripts" / "plot_sweep.py"
ACCURACY = {  # (model, d_model) -> token accuracy of seeds 0, 1, 2; conv at 32, seed 2 failed
    ("multihead", 16): [0.9, 1.0, 0.95],
    ("multihead", 32): [1.0, 1.0, 1.0],
    ("conv", 16): [0.1, 0.2, 0.15],
    ("conv", 32): [0.3, 0.5],
}


@pytest.fixture
def mixer_sweep(tmp_path):
    """`train.py -m model=multihead,conv d_model=16,32 seed=0,1,2`, as the sweep leaves it."""
    sweep, job = tmp_path / "sweep", 0
    for (model, width), values in ACCURACY.items():
        for seed in range(3):
            overrides = [f"model={model}", f"d_model={width}", f"seed={seed}"]
            if seed < len(values):
                write_job(sweep, job, overrides, run_info={"status": "ok", "wall_time_s": 1.0},
                          metrics={"val/token_acc": values[seed], "global_step": 10})
            else:
                write_job(sweep, job, overrides, run_info={"status": "failed", "error": "diverged"})
            job += 1
    (sweep / "multirun.yaml").write_text("hydra:\n  overrides:\n    task:\n    - model=multihead,conv\n"
                                         "    - d_model=16,32\n    - seed=0,1,2\n")
    return sweep


def test_points_are_the_seed_means_and_sample_stds(mixer_sweep):
    lines = series(collect_sweep(mixer_sweep), "d_model", "model", "val/token_acc")
    assert list(lines) == ["multihead", "conv"]
    for model, points in lines.items():
        assert [p.x for p in points] == [16.0, 32.0]
        for point in points:
            values = ACCURACY[model, int(point.x)]
            mean, std = sample_mean_std(values)
            assert (point.mean, point.std, point.n, point.total) == (pytest.approx(mean), pytest.approx(std),
                                                                     len(values), 3)


def test_the_script_writes_the_png_and_the_table(mixer_sweep, tmp_path):
    out = tmp_path / "out"
    proc = run_in_process(PLOT, str(mixer_sweep), "--out", str(out), check=True)
    png, md = out / "val_token_acc_vs_d_model.png", out / "val_token_acc_vs_d_model.md"
    with Image.open(png) as image:
        assert image.format == "PNG" and image.size == (640, 440)
    table = md.read_text()
    mean, std = sample_mean_std([0.3, 0.5])
    assert f"| `conv` | 0.150 ± 0.050 (n=3) | {mean:.3f} ± {std:.3f} (n=2 of 3) |" in table
    assert "| `multihead` | 0.950 ± 0.050 (n=3) | 1.000 ± 0.000 (n=3) |" in table
    assert table in proc.stdout


@pytest.mark.parametrize(("args", "named"), [(["--x", "heads"], "heads"), (["--metric", "val/nothing"], "val/nothing")])
def test_a_setting_or_metric_the_sweep_lacks_is_one_line(mixer_sweep, tmp_path, args, named):
    proc = run_in_process(PLOT, str(mixer_sweep), "--out", str(tmp_path), *args)
    assert proc.returncode == 1 and named in proc.stderr and proc.stderr.count("\n") == 1
    assert json.loads((mixer_sweep / "0" / "metrics.json").read_text())["val/token_acc"] == 0.9  # left as it was
