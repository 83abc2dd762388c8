"""scripts/benchmark.py and its harness (scripts/benchmarks/).

--quick runs every section and records every row (timings are not checked: the machine is shared); the
hand-written SDPA twins of section A compute what an independent float64 reference computes, and what our
variants compute; the map logger is timed through a Lightning profiler, not by patching it.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

import lightning as L
import numpy as np
import pytest
import torch
from PIL import Image

from conftest import ROOT, compose_config, run_in_process

SCRIPTS = ROOT / "scripts"
BENCHMARK = SCRIPTS / "benchmark.py"

KERNEL_CASES = ("plain", "multihead", "multihead_weights", "multihead_concat", "self", "nn_mha", "nn_mha_weights")
VARIANTS_QUICK = ("gqa_kv2", "gqa_kv1", "rope", "alibi")  # --quick has 4 heads: kv_heads 2 and 1
EXPECTED_ROWS = {
    "A/gemm",
    *(f"A/{kind}/{case}" for kind in ("fwd", "fwd+bwd") for case in KERNEL_CASES),
    *(f"A/{kind}/{case}{twin}" for kind in ("fwd", "fwd+bwd") for case in VARIANTS_QUICK for twin in ("", "_twin")),
    "A/memory/multihead", "A/memory/multihead_weights",
    "A/memory/kv_projections/kv_heads_4", "A/memory/kv_projections/kv_heads_1",
    "B/framework", "B/framework_no_maps", "B/plain", "B/framework_cpu", "B/plain_cpu", "B/lightning_floor",
    "B/framework_vs_floor",
    "C/maps_on", "C/maps_off", "C/overhead", "C/overhead_run", "C/overhead_cpu", "C/first_event", "C/event", "C/share",
    "C/final_validation_ablation_on", "C/final_validation_ablation_off", "C/ablation_pass", "C/ablation_overhead",
    "C/ablation_run_ratio", "C/validation_pass_ms", "C/circuit_scores_ms", "C/prefix_probe_ms", "C/loss_by_index_ms",
    "C/circuit_metrics_per_validation", "C/circuit_metrics_run_share",
    "C/attribution_during_training_ms", "C/attribution_final_ms", "C/attribution_per_validation",
    "C/attribution_run_share",
    "D/help", "D/config_error", "D/type_error", "D/import_lightning", "D/first_step", "D/time_to_result",
    "D/default_run", "D/sweep_job_overhead", "D/sweep_job_start", "D/sweep_job_end", "D/sweep_job_training",
}
# The quick benchmark of these tests measures one mixer against multihead in section E, a twinned one (its memory is
# measured in a process per length); every mixer of the registry is the default (test_section_e_measures_...).
QUICK_MIXERS = ("conv",)
QUICK_ARGS = ("--quick", "--mixers", ",".join(QUICK_MIXERS), "--repeats", "1")


def section_e_rows(mixers: tuple[str, ...]) -> set[str]:
    """Section E's rows in --quick for ``mixers`` (multihead first: the baseline, with no crossover), and the
    twin rows of those with a hand-written twin."""
    return {*(f"E/{kind}/{mixer}/{t}" for kind in ("fwd+bwd", "memory") for mixer in mixers for t in (64, 128, 256)),
            *(f"E/{kind}/{mixer}" for kind in ("exponent", "exponent_upper") for mixer in mixers),
            *(f"E/crossover/{mixer}" for mixer in mixers[1:]),
            *(f"E/twin/{mixer}{twin}" for mixer in mixers if mixer in harness("scaling").TWINNED for twin in ("", "_twin"))}


EXPECTED_TARGETS = {
    "target/A/fwd+bwd_vs_plain", "target/A/fwd+bwd_vs_nn_mha", "target/A/fwd_gemm_fraction",
    *(f"target/A/fwd+bwd_{case}_vs_twin" for case in VARIANTS_QUICK),
    "target/B/throughput", "target/C/overhead", "target/C/ablation", "target/D/help", "target/D/config_error", "target/D/type_error",
    "target/D/first_step", "target/D/sweep_job_overhead",
}
# Rows without a value in --quick: no default run (time to result), runs too short for a second map event.
# Section E's crossovers: none when a mixer is not faster than softmax attention within the lengths measured.
EMPTY_IN_QUICK = {"D/time_to_result", "D/default_run", "C/event"}


def harness(name: str):
    """A module of scripts/benchmarks/ (scripts/ is not a package on the test path)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    return importlib.import_module(f"benchmarks.{name}")


def run_benchmark(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    # Passive OpenMP waiting keeps the training subprocesses fast when other jobs share the cores.
    env = {**os.environ, "PYTHONIOENCODING": "utf-8", "COLUMNS": "200", "OMP_WAIT_POLICY": "PASSIVE"}
    return subprocess.run([sys.executable, str(BENCHMARK), *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=timeout)


@pytest.fixture(scope="module")
def quick(tmp_path_factory) -> tuple[subprocess.CompletedProcess, dict, Path]:
    out_dir = tmp_path_factory.mktemp("benchmarks")
    proc = run_benchmark(*QUICK_ARGS, "--out-dir", str(out_dir))
    files = sorted(out_dir.glob("*.json"))
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert len(files) == 1, files
    return proc, json.loads(files[0].read_text()), out_dir


def test_quick_produces_every_row(quick):
    _, result, _ = quick
    assert result["errors"] == []
    keys = [row["key"] for row in result["rows"]]
    assert len(keys) == len(set(keys))
    assert set(keys) == EXPECTED_ROWS | section_e_rows(("multihead", *QUICK_MIXERS))
    for row in result["rows"]:
        if row["key"] in EMPTY_IN_QUICK or row["key"].startswith("E/crossover/"):
            continue
        assert isinstance(row["value"], float) and np.isfinite(row["value"]), row
    assert {row["key"] for row in result["targets"]} == EXPECTED_TARGETS
    assert all(row["ok"] in (True, False) for row in result["targets"])  # measured; pass or miss not checked


def test_circuit_metrics_rows_add_up(quick):
    """The per-validation share and the run share are the three timed metrics over the plain pass and over the
    maps-on runs' wall time, with one validation every val_check_interval steps and the final one."""
    _, result, _ = quick
    rows = {row["key"]: row for row in result["rows"]}
    added = sum(rows[f"C/{name}_ms"]["value"] for name in ("circuit_scores", "prefix_probe", "loss_by_index"))
    assert added > 0
    assert rows["C/circuit_metrics_per_validation"]["value"] == pytest.approx(
        added / rows["C/validation_pass_ms"]["value"] * 100)
    every = compose_config().trainer.val_check_interval  # the default run's (configs/trainer/default.yaml)
    shares = [added / 1000 * (run["steps"] // every + 1) / run["process_s"] * 100 for run in result["runs"]
              if run.get("kind") == "maps_on"]
    assert rows["C/circuit_metrics_run_share"]["samples"] == pytest.approx(shares)


def test_attribution_rows_add_up():
    """The run share: the pass during training at each validation of the run and the final one's on the whole set,
    over the run's wall time; measured where the task has a corruption (the default run's has none)."""
    cost = harness("attribution_cost")
    rows, _ = cost.attribution_rows({"maps_on": [{"steps": 125, "process_s": 10.0}]}, repeats=1)
    values = {row.key: row.value for row in rows}
    during, final = values["C/attribution_during_training_ms"], values["C/attribution_final_ms"]
    assert 0 < during < final  # the first examples, then the whole validation set
    every = compose_config().trainer.val_check_interval
    assert values["C/attribution_run_share"] == pytest.approx((during * (125 // every) + final) / 1000 / 10.0 * 100)
    assert compose_config(cost.OVERRIDES).task.name == "induction" and compose_config().task.name == "reverse"


def test_lightning_floor_splits_the_gap_round_by_round():
    """Lightning's own loop against the plain loop, and the framework against it: each a median of the ratios of
    one round (runs of a round are back to back)."""
    runs = {"maps_on": [{"steps": 120, "steps_per_s": 90.0, "steps_per_cpu_s": 80.0},
                        {"steps": 120, "steps_per_s": 60.0, "steps_per_cpu_s": 80.0},
                        {"steps": 120, "steps_per_s": 85.0, "steps_per_cpu_s": 80.0}],
            "plain": [{"steps_per_s": 100.0, "steps_per_cpu_s": 100.0, "torch_threads": 1},
                      {"steps_per_s": 50.0, "steps_per_cpu_s": 100.0, "torch_threads": 1},
                      {"steps_per_s": 100.0, "steps_per_cpu_s": 100.0, "torch_threads": 1}],
            "floor": [{"steps_per_s": 95.0, "steps_per_cpu_s": 90.0}, {"steps_per_s": 40.0, "steps_per_cpu_s": 90.0},
                      {"steps_per_s": 100.0, "steps_per_cpu_s": 90.0}]}
    rows, _ = harness("throughput").throughput_rows(runs, harness("training").FULL_TRAINING)
    rows = {row.key: row for row in rows}
    assert rows["B/lightning_floor"].ratio == pytest.approx(0.95)  # of 0.95, 0.8, 1.0
    assert rows["B/framework_vs_floor"].value == pytest.approx(90 / 95)  # of 90/95, 1.5, 0.85
    assert rows["B/framework"].ratio == pytest.approx(0.9)  # of 0.9, 1.2, 0.85


def test_sweep_job_overhead_is_its_wall_time_minus_its_training(tmp_path):
    """From the job's process start (its timer) to its run_info.json's last write, less the fit's training."""
    sweep = harness("sweep_overhead")
    for num, (start, train_start, train_end, recorded) in enumerate([(100.0, 101.5, 104.0, 105.25),
                                                                     (100.0, 100.5, 103.0, 104.0)]):
        job = tmp_path / str(num)
        job.mkdir()
        (job / sweep.TIMER_FILE).write_text(json.dumps({"process_start_wall": start, "train_start_wall": train_start,
                                                        "train_end_wall": train_end}))
        (job / sweep.RUN_INFO).write_text("{}")
        os.utime(job / sweep.RUN_INFO, ns=(int(recorded * 1e9), int(recorded * 1e9)))
    jobs = [sweep.job_times(tmp_path / str(num)) for num in (0, 1)]
    assert jobs[0] == pytest.approx({"job_s": 5.25, "training_s": 2.5, "start_s": 1.5, "end_s": 1.25,
                                     "overhead_s": 2.75})
    rows, targets = sweep.sweep_rows(jobs, sweep.FULL_SWEEP)
    rows = {row.key: row for row in rows}
    assert rows["D/sweep_job_overhead"].value == pytest.approx((2.75 + 1.5) / 2) == targets["sweep job overhead"]
    assert rows["D/sweep_job_overhead"].ok is False  # 2.1 s against 1 s
    assert rows["D/sweep_job_start"].samples == pytest.approx([1.5, 0.5])


def test_quick_records_machine_command_and_runs(quick):
    _, result, _ = quick
    assert result["command"] == f"python scripts/benchmark.py {' '.join(QUICK_ARGS)} --out-dir {quick[2]}"
    assert {"cpu", "cores", "torch", "lightning", "python"} <= set(result["machine"])
    kinds = sorted(run.get("kind", "plain") for run in result["runs"])
    assert kinds == ["ablation_off", "floor", "maps_off", "maps_on", "plain"]
    assert result["kernel_shape"]["tokens"] < 1024  # --quick: small shapes
    maps_on = next(run for run in result["runs"] if run.get("kind") == "maps_on")
    maps_off = next(run for run in result["runs"] if run.get("kind") == "maps_off")
    # The profiler saw every batch end of the map logger, and nothing of it when the maps are off.
    assert len(maps_on["map_logger_hooks_s"]["on_train_batch_end"]) == maps_on["steps"] == 30
    assert maps_off["map_logger_hooks_s"] == {}
    ablation_off = next(run for run in result["runs"] if run.get("kind") == "ablation_off")
    # The final validation of both was timed; the one with the head ablation is the longer.
    assert maps_on["final_validation_s"] > ablation_off["final_validation_s"] > 0


def test_quick_prints_tables(quick):
    proc, _, _ = quick
    for title in ("A. Attention kernels", "B. Training throughput", "C. Attention-map logging overhead",
                  "D. Start-up and time to result", "E. What replaces attention", "Targets"):
        assert title in proc.stdout
    assert "written to" in proc.stdout
    with Image.open(next(quick[2].glob("*.png"))) as plot:  # section E's log-log plot, beside the JSON
        assert plot.format == "PNG" and plot.size == (1000, 420)


def test_results_never_overwrite(tmp_path):
    report = harness("report")
    first = report.unique_json_path(tmp_path)
    first.write_text("{}")
    second = report.unique_json_path(tmp_path)
    assert second != first and not second.exists()


def test_help_and_bad_arguments(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    proc = run_in_process(BENCHMARK, "--help")
    assert proc.returncode == 0
    for flag in ("--quick", "--device", "--repeats", "--sections"):
        assert flag in proc.stdout
    assert "issue" not in proc.stdout.lower()  # the project names no issue numbers
    proc = run_in_process(BENCHMARK, "--sections", "A,X")
    assert proc.returncode == 2
    assert "choose among A, B, C, D" in proc.stderr


# --------------------------------------------------------------------------------------------------------
# Section A's twins: what they compute


def naive_attention(q, k, v, bias=None):
    """float64 causal attention, one (query, key) pair at a time: q (B, H, T, d), k and v (B, H, T, d)."""
    b, h, t, d = q.shape
    out = torch.zeros_like(q)
    for i in range(t):
        scores = torch.stack([(q[:, :, i] * k[:, :, j]).sum(-1) / math.sqrt(d) for j in range(i + 1)], -1)
        if bias is not None:
            scores = scores + bias[:, i, : i + 1]
        weights = torch.softmax(scores, dim=-1)  # (B, H, i + 1)
        out[:, :, i] = (weights[..., None] * v[:, :, : i + 1]).sum(2)
    return out


def naive_heads(module, x, kv_heads):
    """Queries, keys and values of a twin, keys and values repeated so that query head h reads kv head
    h // (H / kv_heads)."""
    b, t, _ = x.shape
    heads, d = module.heads, module.head_dim
    q = module.W_query(x).view(b, t, heads, d).transpose(1, 2)
    k = module.W_key(x).view(b, t, kv_heads, d).transpose(1, 2)
    v = module.W_value(x).view(b, t, kv_heads, d).transpose(1, 2)
    groups = torch.tensor([h // (heads // kv_heads) for h in range(heads)])
    return q, k[:, groups], v[:, groups]


def merged(module, context):
    b, h, t, d = context.shape
    return module.out_proj(context.transpose(1, 2).reshape(b, t, h * d))


@pytest.mark.parametrize("kv_heads", [12, 4, 2, 1])
def test_grouped_query_twin_matches_a_naive_reference(kv_heads):
    twins = harness("twins")
    torch.manual_seed(0)
    module = twins.GroupedQuerySDPA(48, 12, kv_heads).double()
    x = torch.randn(2, 6, 48, dtype=torch.float64)
    expected = merged(module, naive_attention(*naive_heads(module, x, kv_heads)))
    torch.testing.assert_close(module(x), expected)


def test_rotary_twin_matches_a_naive_reference():
    twins = harness("twins")
    torch.manual_seed(0)
    module = twins.RotarySDPA(48, 12).double()
    x = torch.randn(2, 6, 48, dtype=torch.float64)
    q, k, v = naive_heads(module, x, 12)

    def rotate(x):  # feature i pairs with i + d/2, turned by position * 10000^(-2i/d)
        out = x.clone()
        d = x.shape[-1]
        for p in range(x.shape[-2]):
            for i in range(d // 2):
                angle = p * 10000.0 ** (-2 * i / d)
                a, b = x[..., p, i], x[..., p, i + d // 2]
                out[..., p, i] = a * math.cos(angle) - b * math.sin(angle)
                out[..., p, i + d // 2] = a * math.sin(angle) + b * math.cos(angle)
        return out

    torch.testing.assert_close(module(x), merged(module, naive_attention(rotate(q), rotate(k), v)))


def test_alibi_twin_matches_a_naive_reference():
    twins = harness("twins")
    # The paper's slopes: 2^-1 ... 2^-8 for 8 heads; 12 heads: those of 8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5.
    assert twins.alibi_slopes(8) == pytest.approx([2.0**-i for i in range(1, 9)])
    assert twins.alibi_slopes(12) == pytest.approx([2.0**-i for i in range(1, 9)] + [2.0**-(i + 0.5) for i in range(4)])
    torch.manual_seed(0)
    module = twins.AlibiSDPA(48, 12).double()
    x = torch.randn(2, 6, 48, dtype=torch.float64)
    slopes = torch.tensor(twins.alibi_slopes(12), dtype=torch.float64)
    distance = torch.arange(6)[:, None] - torch.arange(6)[None, :]
    bias = -slopes[:, None, None] * distance  # (H, T, T): -m_h * (i - j)
    torch.testing.assert_close(module(x), merged(module, naive_attention(*naive_heads(module, x, 12), bias)))


@pytest.mark.parametrize(("twin", "options"), [
    ("GroupedQuerySDPA", {"kv_heads": 4}), ("GroupedQuerySDPA", {"kv_heads": 1}),
    ("RotarySDPA", {"position": "rope"}), ("AlibiSDPA", {"position": "alibi"}),
])
def test_twins_compute_what_our_variants_compute(twin, options):
    from attention_lab.attention import build_attention

    twins = harness("twins")
    torch.manual_seed(0)
    ours = build_attention("multihead", d_in=48, d_out=48, num_heads=12, causal=True, **options)
    reference = getattr(twins, twin)(48, 12, *([options["kv_heads"]] if "kv_heads" in options else []))
    for name in ("W_query", "W_key", "W_value", "out_proj"):
        getattr(reference, name).load_state_dict(getattr(ours, name).state_dict())
    x = torch.randn(3, 9, 48)
    torch.testing.assert_close(ours(x).context, reference(x))


# --------------------------------------------------------------------------------------------------------
# Sections B and C: the timing callback and profiler, in a real (tiny) Lightning run


class SlowLogger(L.Callback):  # module level: Lightning names a callback's hooks by its class's qualified name
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        time.sleep(0.002)


class Other(L.Callback):
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        pass


def test_profiler_times_one_callbacks_hooks_and_the_timer_records_them(tmp_path):
    from lightning.pytorch.demos.boring_classes import BoringModel

    hook_profiler, timer = harness("hook_profiler"), harness("timer")

    path = tmp_path / "timer.json"
    trainer = L.Trainer(max_steps=5, limit_val_batches=0, logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False, accelerator="cpu",
                        profiler=hook_profiler.CallbackHookProfiler("SlowLogger"),
                        callbacks=[SlowLogger(), Other(), timer.BenchmarkTimer(str(path), warmup_steps=2)])
    trainer.fit(BoringModel())
    result = json.loads(path.read_text())
    hooks = result["map_logger_hooks_s"]
    assert len(hooks["on_train_batch_end"]) == 5
    assert min(hooks["on_train_batch_end"]) >= 0.002  # the sleeping hook: the profiler timed it
    assert all(hook.startswith("on_") or hook in ("setup", "teardown") for hook in hooks)
    assert result["steps"] == 5 and result["window_steps"] == 3
    assert result["steps_per_s"] == pytest.approx(3 / result["train_s"])


def test_logging_events_and_time_in_logger():
    overhead = harness("logging_overhead")
    # The map logger logs its predictions once per doubling (callbacks/probe_logging.py's is_doubling): at
    # every_n_steps=1, steps 10, 20, 40, ...; batch i ends step i + 1; then the end of training (step 25) ...
    ends = [0.1] * 25
    ends[9], ends[19] = 3.0, 4.0
    run = {"map_logger_hooks_s": {"setup": [9.0], "on_train_batch_end": ends, "on_train_end": [5.0],
                                  "teardown": [9.0]}}
    assert overhead.logging_events(run, 1) == [3.0, 4.0, 5.0]
    # ... which logs nothing new when its step was just logged (step 20 with every_n_steps=2).
    short = {"map_logger_hooks_s": {"on_train_batch_end": ends[:20], "on_train_end": [5.0]}}
    assert overhead.logging_events(short, 2) == [4.0]
    long_run = {"map_logger_hooks_s": {"on_train_batch_end": [float(i + 1) for i in range(90)], "on_train_end": [0.5]}}
    assert overhead.logging_events(long_run, 1) == [10.0, 20.0, 40.0, 80.0, 0.5]
    assert overhead.time_in_logger(run) == pytest.approx(sum(ends) + 5.0)



# --------------------------------------------------------------------------------------------------------
# Section E: the mixers' twins, the fitted exponents and the crossover


@pytest.mark.parametrize("mixer", ["linear", "sigmoid", "conv"])
def test_mixer_twins_compute_what_our_variants_compute(mixer):
    scaling = harness("scaling")
    shape = scaling.ScalingShape(batch=2, d_model=16, heads=2, lengths=(), twin_tokens=0, min_run_time=0.0)
    ours = scaling.build(mixer, shape)
    twin = scaling.twin_of(mixer, ours, shape, "cpu")
    x = torch.randn(2, 70, 16)  # longer than a chunk of the linear prefix sums (64)
    torch.testing.assert_close(ours(x).context, twin(x), atol=2e-5, rtol=1e-4)


def test_fitted_exponents_and_crossover_of_known_power_laws():
    scaling = harness("scaling")
    lengths = [256, 512, 1024, 2048]
    quadratic = [3e-9 * t**2 for t in lengths]
    linear = [1e-6 * t for t in lengths]  # 1e-6 T = 3e-9 T^2 at T = 1000/3
    assert scaling.fit_exponent(lengths, quadratic) == pytest.approx(2.0)
    assert scaling.fit_exponent(lengths, linear) == pytest.approx(1.0)
    assert scaling.crossover(lengths, linear, quadratic) == pytest.approx(1000 / 3)
    assert scaling.crossover(lengths, [10 * q for q in quadratic], quadratic) is None  # never faster
    assert scaling.crossover(lengths, [q / 2 for q in quadratic], quadratic) == 256  # faster from the start


def test_section_e_measures_every_replacement_the_registry_offers():
    """The mixers come from the registry: every multi-head, self-attending variant, and one registered later too."""
    from attention_lab.attention import ATTENTION_REGISTRY
    from attention_lab.attention.declared import declared_variants, facts_of

    scaling = harness("scaling")
    registered = {name: facts_of(name, cls) for name, cls in ATTENTION_REGISTRY.items()}
    mixers = scaling.scaled_mixers()
    assert mixers[0] == "multihead"
    assert set(mixers) == {name for name, facts in registered.items() if facts.multi_head and not facts.takes_source}
    assert {"linear", "conv", "mamba2", "gated_deltanet"} <= set(mixers)
    assert not {"self", "simple", "cross"} & set(mixers)  # one head, or keys from a second sequence
    later = dataclasses.replace(declared_variants()["linear"], name="later")
    assert "later" in scaling.scaled_mixers({**declared_variants(), "later": later})


def test_section_e_mixers_option_takes_registered_names_only():
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    benchmark = importlib.import_module("benchmark")
    assert benchmark.parse_args(["--mixers", "mamba2,linear"]).mixers == ("mamba2", "linear")
    with pytest.raises(SystemExit):
        benchmark.parse_args(["--mixers", "mamba3"])
