"""The sizes of section A's kernels and of its peak-memory rows (:mod:`benchmarks.kernels`, :mod:`benchmarks.memory`):
the full protocol and ``--quick``'s."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KernelShape:
    batch: int
    tokens: int
    d_model: int
    heads: int
    memory_batch: int  # peak-memory rows: one forward at this batch and length
    memory_tokens: int
    min_run_time: float  # seconds per Timer measurement (at least one call after the warm-up call)


# Chapter 3's efficient-MHA comparison: batch 8, 1024 tokens, d=768, 12 heads, causal, float32.
FULL_KERNELS = KernelShape(batch=8, tokens=1024, d_model=768, heads=12, memory_batch=1, memory_tokens=4096,
                           min_run_time=0.2)
QUICK_KERNELS = KernelShape(batch=2, tokens=128, d_model=96, heads=4, memory_batch=1, memory_tokens=512,
                            min_run_time=0.02)
