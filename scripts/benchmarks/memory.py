"""Peak memory of one forward (autograd on, as in training), each in a fresh process.

CUDA: the caching allocator's peak over what was allocated before. CPU (Linux): the resident-set
high-water mark (VmHWM, reset through /proc/self/clear_refs) over the resident set before; a fresh process
(benchmarks.processes.in_fresh_process) keeps memory freed earlier from being reused unseen.
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import TYPE_CHECKING, Any

from benchmarks.processes import in_fresh_process
from benchmarks.rows import Progress, Row, no_progress

if TYPE_CHECKING:
    from benchmarks.kernel_shape import KernelShape


def rss_mib(field_name: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    raise OSError(f"{field_name} not in /proc/self/status")


def peak_memory(request: dict[str, Any]) -> float | None:
    """MiB that one forward of our multihead adds to what is allocated before it. ``part``: "forward" (the
    whole module) or "kv_projections" (only W_key(x) and W_value(x), kept as autograd keeps them)."""
    import torch

    from attention_lab.attention import build_attention

    device, d, heads = request["device"], request["d_model"], request["heads"]
    torch.manual_seed(0)
    module = build_attention("multihead", d_in=d, d_out=d, num_heads=heads, kv_heads=request.get("kv_heads"),
                             causal=True).to(device)

    def run(x: torch.Tensor) -> Any:
        if request.get("part") == "kv_projections":
            return module.W_key(x), module.W_value(x)
        return module(x, need_weights=request["need_weights"])

    run(torch.randn(1, 16, d, device=device))  # first-call set-up
    x = torch.randn(request["batch"], request["tokens"], d, device=device)
    gc.collect()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = run(x)
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident set
        before = rss_mib("VmRSS")
        out = run(x)
        peak = rss_mib("VmHWM")
    except OSError:
        return None
    del out
    return peak - before


def peak_memory_mib(request: dict[str, Any]) -> float | None:
    """peak_memory(request) in a fresh process."""
    return in_fresh_process(peak_memory, request, what="peak-memory worker")


def memory_rows(shape: KernelShape, *, device: str, progress: Progress = no_progress) -> list[Row]:
    """Fast path against the weights path (O(T) against O(T^2)), and K/V projections with one kv head
    against one per query head (grouped-query attention)."""
    base = {"device": device, "d_model": shape.d_model, "heads": shape.heads, "batch": shape.memory_batch,
            "tokens": shape.memory_tokens, "need_weights": False, "part": "forward"}
    at = f"batch {shape.memory_batch}, {shape.memory_tokens} tokens"
    unit_note = "GPU allocator peak" if device == "cuda" else "resident-set high-water mark in a fresh process"

    def measure(label: str, **changes: Any) -> float | None:
        progress(f"A kernels: peak memory at {shape.memory_tokens} tokens · {label}")
        return peak_memory_mib({**base, **changes})

    fast, slow = measure("multihead"), measure("multihead_weights", need_weights=True)
    weights_mib = 4 * shape.memory_batch * shape.heads * shape.memory_tokens**2 / 2**20
    rows = [
        Row("A", "A/memory/multihead", f"peak memory, forward · ours: multihead (fast path), {at}", fast, "MiB",
            note=f"{unit_note}; autograd on"),
        Row("A", "A/memory/multihead_weights", f"peak memory, forward · ours: multihead, need_weights=True, {at}",
            slow, "MiB", ratio=None if not fast or slow is None else slow / fast, ratio_to="fast path",
            note=f"{unit_note}; one (B, H, T, T) float32 map = {weights_mib:.0f} MiB"),
    ]
    h = shape.heads
    kv_bytes = {k: 2 * 4 * shape.memory_batch * shape.memory_tokens * k * (shape.d_model // h) / 2**20 for k in (h, 1)}
    names = {h: f"peak memory, K/V projections · kv_heads={h} (one per query head), {at}",
             1: f"peak memory, K/V projections · kv_heads=1 (multi-query), {at}"}
    full, single = (measure(f"K/V projections, kv_heads={k}", kv_heads=k, part="kv_projections") for k in (h, 1))
    return rows + [
        Row("A", f"A/memory/kv_projections/kv_heads_{h}", names[h], full, "MiB",
            note=f"{unit_note}; K and V: {kv_bytes[h]:.1f} MiB float32"),
        Row("A", "A/memory/kv_projections/kv_heads_1", names[1], single, "MiB",
            ratio=None if not full or single is None else single / full, ratio_to=f"kv_heads={h}",
            note=f"{unit_note}; K and V: {kv_bytes[1]:.1f} MiB float32"),
    ]

