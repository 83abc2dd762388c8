"""The targets every section is held to, computed from the numbers of the same run."""

from __future__ import annotations

from typing import Any

from benchmarks.kernels import TWIN_LIMIT, variant_keys
from benchmarks.rows import Row, check
from benchmarks.startup import COMMAND_LIMIT_S, FIRST_STEP_LIMIT_S, RESULT_LIMIT_S
from benchmarks.sweep_overhead import JOB_OVERHEAD_LIMIT_S

# B: scripts/train.py's steps/s at least this share of a plain PyTorch loop's on the same model (docs/benchmarks.md).
THROUGHPUT_MIN = 0.95


def kernel_targets(a: dict[str, Any], heads: int) -> list[Row]:
    rows = [
        Row("A", "target/A/fwd+bwd_vs_plain", "ours multihead fwd+bwd / plain module", a["fwd+bwd vs plain"], "x",
            target="<= 1.05", ok=check(a["fwd+bwd vs plain"], "<=", 1.05)),
        Row("A", "target/A/fwd+bwd_vs_nn_mha", "ours multihead fwd+bwd / nn.MultiheadAttention(need_weights=False)",
            a["fwd+bwd vs nn_mha"], "x", target="<= 1.00", ok=check(a["fwd+bwd vs nn_mha"], "<=", 1.0)),
        Row("A", "target/A/fwd_gemm_fraction", "ours multihead forward GFLOP/s / same-run GEMM GFLOP/s",
            a["fwd GEMM fraction"], "x", target=">= 0.90", ok=check(a["fwd GEMM fraction"], ">=", 0.9)),
    ]
    for ours, _ in variant_keys(heads):
        both, forward = a["variants"][ours]
        rows.append(Row("A", f"target/A/fwd+bwd_{ours}_vs_twin", f"ours {ours} fwd+bwd / hand-written SDPA twin",
                        both, "x", target=f"<= {TWIN_LIMIT:.2f}", ok=check(both, "<=", TWIN_LIMIT),
                        note=f"forward alone: {forward:.2f}x"))
    return rows


def target_rows(a: dict[str, Any] | None, b: dict[str, Any] | None, c: dict[str, Any] | None,
                d: dict[str, Any] | None, *, heads: int) -> list[Row]:
    rows = kernel_targets(a, heads) if a else []
    if b:
        rows.append(Row("B", "target/B/throughput", "framework steps/s / plain loop steps/s", b["throughput ratio"],
                        "x", target=f">= {THROUGHPUT_MIN:.2f}", ok=check(b["throughput ratio"], ">=", THROUGHPUT_MIN),
                        note=f"per CPU-second: {b['throughput ratio (CPU time)']:.2f}x"))
    if c:
        rows.append(Row("C", "target/C/overhead", "attention maps on vs off: fit wall-time overhead",
                        c["logging overhead"] * 100, "%", target="<= 5 %", ok=check(c["logging overhead"], "<=", 0.05),
                        note=f"fit + final validation {c['logging overhead (run)'] * 100:+.1f} %; "
                             f"CPU time {c['logging overhead (CPU)'] * 100:+.1f} %; training thread in the "
                             f"logger {c['logging share'] * 100:.1f} %"))
        if "ablation overhead" in c:
            rows.append(Row("C", "target/C/ablation", "head ablation and patching / default run wall time",
                            c["ablation overhead"] * 100, "%", target="<= 10 %",
                            ok=check(c["ablation overhead"], "<=", 0.10),
                            note=f"the pass: {c['ablation pass']:.2f} s"))
    if d:
        for key, label in (("help", "train.py --help"), ("config_error", "config error (cross-field rule)"),
                           ("type_error", "config error (wrong type)")):
            if key in d:
                rows.append(Row("D", f"target/D/{key}", label, d[key], "s", target=f"<= {COMMAND_LIMIT_S} s",
                                ok=check(d[key], "<=", COMMAND_LIMIT_S)))
        rows.append(Row("D", "target/D/first_step", "start -> first training step", d.get("first step"), "s",
                        target=f"<= {FIRST_STEP_LIMIT_S:.0f} s", ok=check(d.get("first step"), "<=", FIRST_STEP_LIMIT_S)))
        if "sweep job overhead" in d:
            rows.append(Row("D", "target/D/sweep_job_overhead", "sweep job: wall time minus its training",
                            d["sweep job overhead"], "s", target=f"<= {JOB_OVERHEAD_LIMIT_S:.0f} s",
                            ok=check(d["sweep job overhead"], "<=", JOB_OVERHEAD_LIMIT_S)))
        if "time to result" in d:
            value = d["time to result"]
            rows.append(Row("D", "target/D/time_to_result", "default run: start -> val seq_acc >= 0.99", value, "s",
                            target=f"<= {RESULT_LIMIT_S:.0f} s",
                            ok=check(value, "<=", RESULT_LIMIT_S) if value is not None else False))
    return rows
