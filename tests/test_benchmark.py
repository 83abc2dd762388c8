"""scripts/benchmark.py --quick runs every benchmark of issue 4 and records every row (timings are not checked:
the machine is shared), and the fast TensorBoard heatmaps look like plotting.attention_figure."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
BENCHMARK = ROOT / "scripts" / "benchmark.py"

KERNEL_CASES = ("plain", "multihead", "multihead_weights", "multihead_concat", "self", "nn_mha", "nn_mha_weights")
EXPECTED_ROWS = {
    "A/gemm",
    *(f"A/{kind}/{case}" for kind in ("fwd", "fwd+bwd") for case in KERNEL_CASES),
    "A/memory/multihead", "A/memory/multihead_weights",
    "B/framework", "B/framework_no_maps", "B/plain", "B/framework_cpu", "B/plain_cpu",
    "C/maps_on", "C/maps_off", "C/overhead", "C/overhead_cpu", "C/first_event", "C/event", "C/share",
    "D/help", "D/config_error", "D/type_error", "D/import_lightning", "D/first_step", "D/time_to_result",
    "D/default_run",
}
EXPECTED_TARGETS = {
    "target/A/fwd+bwd_vs_plain", "target/A/fwd+bwd_vs_nn_mha", "target/A/fwd_gemm_fraction", "target/B/throughput",
    "target/C/overhead", "target/D/help", "target/D/config_error", "target/D/type_error", "target/D/first_step",
}
# Rows without a value in --quick: no default run (time to result), runs too short for a second map event.
EMPTY_IN_QUICK = {"D/time_to_result", "D/default_run", "C/event"}


def run_benchmark(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    # Passive OpenMP waiting keeps the training subprocesses fast when other jobs share the cores.
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "COLUMNS": "200", "OMP_WAIT_POLICY": "PASSIVE"}
    return subprocess.run([sys.executable, str(BENCHMARK), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=timeout)


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict, Path]:
    out_dir = tmp_path_factory.mktemp("benchmarks")
    proc = run_benchmark("--quick", "--out-dir", str(out_dir))
    files = sorted(out_dir.glob("*.json"))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert len(files) == 1, files
    return proc, json.loads(files[0].read_text()), out_dir


def test_quick_produces_every_row(quick):
    _, result, _ = quick
    assert result["errors"] == []
    keys = [row["key"] for row in result["rows"]]
    assert len(keys) == len(set(keys))
    assert set(keys) == EXPECTED_ROWS
    for row in result["rows"]:
        if row["key"] in EMPTY_IN_QUICK:
            continue
        assert isinstance(row["value"], float) and np.isfinite(row["value"]), row
    assert {row["key"] for row in result["targets"]} == EXPECTED_TARGETS
    assert all(row["ok"] in (True, False) for row in result["targets"])  # measured; pass or miss not checked


def test_quick_records_machine_command_and_runs(quick):
    _, result, _ = quick
    assert result["command"] == f"python scripts/benchmark.py --quick --out-dir {quick[2]}"
    assert {"cpu", "cores", "torch", "lightning", "python"} <= set(result["machine"])
    kinds = sorted(run.get("kind", "plain") for run in result["runs"])
    assert kinds == ["maps_off", "maps_on", "plain"]
    assert result["kernel_shape"]["tokens"] < 1024  # --quick: small shapes


def test_quick_prints_tables(quick):
    proc, _, _ = quick
    for title in ("A. Attention kernels", "B. Training throughput", "C. Attention-map logging overhead",
                  "D. Start-up and time to result", "Targets of issue 4"):
        assert title in proc.stdout
    assert "written to" in proc.stdout


def test_results_never_overwrite(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import benchmark
    finally:
        sys.path.pop(0)
    first = benchmark.unique_json_path(tmp_path)
    first.write_text("{}")
    second = benchmark.unique_json_path(tmp_path)
    assert second != first and not second.exists()


def test_help_and_bad_arguments():
    proc = run_benchmark("--help", timeout=60)
    assert proc.returncode == 0
    for flag in ("--quick", "--device", "--repeats", "--sections"):
        assert flag in proc.stdout
    proc = run_benchmark("--sections", "A,X", timeout=60)
    assert proc.returncode == 2
    assert "choose among A, B, C, D" in proc.stderr


def test_fast_heatmaps_look_like_attention_figure():
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    from attention_lab.callbacks import HeatmapImages, png_bytes
    from attention_lab.plotting import attention_figure

    rng = np.random.default_rng(0)
    images = HeatmapImages()
    for query_words, key_words in ((["Life", "is", "short", "eat", "dessert", "first"],) * 2,
                                   ([f"out{i}" for i in range(4)], ["Your", "journey", "starts", "with", "one", "step"]),
                                   ([f"w{i}" for i in range(12)],) * 2):  # 144 cells: no annotations
        weights = rng.dirichlet(np.ones(len(key_words)) * 0.3, size=len(query_words))
        fast = images.render(weights, query_words, key_words, "layer 1, head 2 · step 300")
        canvas = FigureCanvasAgg(attention_figure(weights, query_words, key_words, "layer 1, head 2 · step 300"))
        canvas.draw()
        reference = np.asarray(canvas.buffer_rgba())[..., :3]
        assert fast.shape == reference.shape and fast.dtype == np.uint8
        difference = np.abs(fast.astype(int) - reference).max(axis=-1)
        assert (difference > 64).mean() < 0.03  # the same picture: only glyph anti-aliasing differs
        assert np.median(difference) == 0
        decoded = np.asarray(Image.open(io.BytesIO(png_bytes(fast))))
        assert np.array_equal(decoded, fast)
        # The buffer is reused: another map, then this one again, gives the same picture.
        images.render(weights[::-1], query_words, key_words, "another title, longer than the first one")
        assert np.array_equal(images.render(weights, query_words, key_words, "layer 1, head 2 · step 300"), fast)
