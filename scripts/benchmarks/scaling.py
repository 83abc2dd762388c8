"""Section E: what replacing softmax attention buys, measured. Forward+backward time and peak memory against the
sequence length (batch and width fixed) for ``multihead`` (softmax, PyTorch's fused kernel) and every other
registered variant that can replace it in a causal stack (multi-head, self-attending: ``linear``, ``conv``,
``mamba2``, ``gated_deltanet``, ... and every variant registered later, read from the registry), the growth
exponent of each one's time (the slope of log time against log T, fitted by least squares), where each overtakes
softmax attention, a log-log plot; and each twinned variant's fast path against its hand-written twin
(benchmarks.mixer_twins), all causal and in the same run.

Timing as in section A (torch.utils.benchmark, rounds whose order rotates, medians). Peak memory: one
forward+backward in a fresh process (benchmarks.memory's method).
"""

from __future__ import annotations

import gc
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from attention_lab.attention.declared import VariantFacts
from benchmarks.kernels import seconds_per_call
from benchmarks.memory import rss_mib
from benchmarks.processes import in_fresh_process
from benchmarks.rows import Progress, Row, median, no_progress

BASELINE = "multihead"  # softmax attention, PyTorch's fused kernel: what every other mixer is compared with
TWINNED = ("linear", "sigmoid", "conv")
# The growth a kind of mixer is expected to show (None: no claim); a variant's kind is its class's ``kind``.
THEORY = {"softmax": "theory ≈ 2", "sigmoid": "theory ≈ 2", "linear": "theory ≈ 1", "conv": "theory ≈ 1 (+ log)",
          "ssm": "theory ≈ 1 (chunked form)", "delta": "theory ≈ 1 (chunked form)"}


def scaled_mixers(variants: Mapping[str, VariantFacts] | None = None) -> tuple[str, ...]:
    """``multihead`` first, then every variant of the registry (``variants``: name -> declared facts; default,
    the attention package's) that can take its place in a causal stack: several heads of its own
    self-attention. The textbook's single-head classes and ``cross`` (keys from a second sequence) are not."""
    from attention_lab.attention.declared import declared_variants

    variants = declared_variants() if variants is None else variants
    others = sorted(name for name, facts in variants.items()
                    if name != BASELINE and facts.multi_head and not facts.takes_source)
    return (BASELINE, *others)


def theory_of(name: str) -> str:
    from attention_lab.attention.declared import declared_variants

    return THEORY.get(declared_variants(only=name)[name].kind, "")


@dataclass(frozen=True)
class ScalingShape:
    batch: int
    d_model: int
    heads: int
    lengths: tuple[int, ...]
    twin_tokens: int  # the length of the twin comparison
    min_run_time: float


FULL_SCALING = ScalingShape(batch=1, d_model=64, heads=2, lengths=(256, 512, 1024, 2048, 4096, 8192),
                            twin_tokens=2048, min_run_time=0.1)
QUICK_SCALING = ScalingShape(batch=1, d_model=32, heads=2, lengths=(64, 128, 256), twin_tokens=128,
                             min_run_time=0.01)


def build(name: str, shape: ScalingShape, device: str = "cpu") -> torch.nn.Module:
    from attention_lab.attention import ATTENTION_REGISTRY, build_attention

    torch.manual_seed(0)
    d = shape.d_model
    return build_attention(name, d_in=d, d_out=ATTENTION_REGISTRY[name].d_out_for(d, shape.heads),
                           num_heads=shape.heads, causal=True).to(device)


def twin_of(name: str, ours: torch.nn.Module, shape: ScalingShape, device: str) -> torch.nn.Module:
    """The hand-written twin of ``name``, with our module's weights."""
    from benchmarks.mixer_twins import ConvTwin, LinearTwin, SigmoidTwin

    kind = {"linear": LinearTwin, "sigmoid": SigmoidTwin, "conv": ConvTwin}[name]
    twin = kind(shape.d_model, shape.heads).to(device)
    twin.load_state_dict(ours.state_dict())
    return twin


def fit_exponent(lengths: list[int], seconds: list[float]) -> float | None:
    """Least-squares slope of log(seconds) against log(T)."""
    if len(lengths) < 2:
        return None
    xs, ys = [math.log(t) for t in lengths], [math.log(s) for s in seconds]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)


def crossover(lengths: list[int], ours: list[float], softmax: list[float]) -> float | None:
    """The length at which ``ours`` becomes faster than softmax, interpolated on log-log axes between the two
    measured lengths around it; the first length if faster from the start; None if never within the range."""
    for i, (a, b) in enumerate(zip(ours, softmax, strict=True)):
        if a < b:
            if i == 0:
                return float(lengths[0])
            gap_before = math.log(ours[i - 1] / softmax[i - 1])  # > 0: slower before
            gap_after = math.log(a / b)  # < 0: faster after
            fraction = gap_before / (gap_before - gap_after)
            return math.exp(math.log(lengths[i - 1]) + fraction * (math.log(lengths[i]) - math.log(lengths[i - 1])))
    return None


def training_step(module: torch.nn.Module, x: torch.Tensor, grad: torch.Tensor, ours: bool):
    def step() -> None:
        module.zero_grad(set_to_none=True)
        out = module(x).context if ours else module(x)
        out.backward(grad)
    return step


def time_lengths(shape: ScalingShape, mixers: Sequence[str], *, rounds: int, device: str,
                 progress: Progress) -> dict[str, dict[int, list]]:
    """fwd+bwd seconds of every mixer at every length, every round. Each round visits every length, and the
    mixers rotate within a round: a burst of load on the shared machine spreads over all the lengths."""
    mixers = tuple(mixers)
    modules = {name: build(name, shape, device) for name in mixers}
    generator = torch.Generator().manual_seed(1)
    inputs = {t: (torch.randn(shape.batch, t, shape.d_model, generator=generator).to(device),
                  torch.randn(shape.batch, t, shape.d_model, generator=generator).to(device)) for t in shape.lengths}
    seconds: dict[str, dict[int, list[float]]] = {name: {t: [] for t in shape.lengths} for name in mixers}
    for round_index in range(rounds):
        for t, (x, grad) in inputs.items():
            shift = round_index % len(mixers)
            order = mixers[shift:] + mixers[:shift]
            for name in order:
                progress(f"E scaling: {t} tokens, round {round_index + 1}/{rounds} · {name}")
                seconds[name][t].append(seconds_per_call(training_step(modules[name], x, grad, True),
                                                         shape.min_run_time))
    return seconds


def time_twins(shape: ScalingShape, names: Sequence[str], *, rounds: int, device: str,
               progress: Progress) -> dict[str, list[float]]:
    """fwd+bwd seconds of each twinned variant of ``names`` and of its twin (key ``<name>_twin``), at twin_tokens."""
    cases = {}
    for name in names:
        cases[name] = (build(name, shape, device), True)
        cases[f"{name}_twin"] = (twin_of(name, cases[name][0], shape, device), False)
    generator = torch.Generator().manual_seed(2)
    x = torch.randn(shape.batch, shape.twin_tokens, shape.d_model, generator=generator).to(device)
    grad = torch.randn(shape.batch, shape.twin_tokens, shape.d_model, generator=generator).to(device)
    seconds: dict[str, list[float]] = {key: [] for key in cases}
    keys = list(cases)
    for round_index in range(rounds):
        shift = round_index % len(keys)
        for key in keys[shift:] + keys[:shift]:
            progress(f"E twins: round {round_index + 1}/{rounds} · {key}")
            module, ours = cases[key]
            seconds[key].append(seconds_per_call(training_step(module, x, grad, ours), shape.min_run_time))
    return seconds


def peak_memory(request: dict[str, Any]) -> float | None:
    """MiB that one forward+backward of the mixer adds to what is allocated before it (see benchmarks.memory)."""
    torch.set_num_threads(1)  # as the timings
    shape = ScalingShape(request["batch"], request["d_model"], request["heads"], (), 0, 0.0)
    device = request["device"]
    module = build(request["name"], shape, device)
    module(torch.randn(1, 16, shape.d_model, device=device)).context.sum().backward()  # first-call set-up
    module.zero_grad(set_to_none=True)
    x = torch.randn(shape.batch, request["tokens"], shape.d_model, device=device)
    gc.collect()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        module(x).context.sum().backward()
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident set
        before = rss_mib("VmRSS")
        module(x).context.sum().backward()
        return rss_mib("VmHWM") - before
    except OSError:
        return None


def peak_memory_mib(request: dict[str, Any]) -> float | None:
    return in_fresh_process(peak_memory, request, what="peak-memory worker")


def plot(lengths: list[int], seconds: dict[str, list[float]], memory: dict[str, list[float | None]],
         path: Path) -> Path:
    """Two log-log panels: fwd+bwd time and peak memory against T, one line per mixer."""
    from matplotlib import colormaps
    from matplotlib.figure import Figure  # Agg, no display

    fig = Figure(figsize=(10, 4.2), dpi=100, layout="constrained")
    time_ax, memory_ax = fig.subplots(1, 2)
    colours = colormaps["tab20"].colors  # more mixers than the default cycle's 10 colours: no two lines alike
    for i, name in enumerate(seconds):
        style = {"color": colours[(2 * i) % 20 + (i >= 10)], "marker": "os^vD<>ph*"[i % 10],
                 "linestyle": "-" if i < 10 else "--", "label": name, "base": 2}
        time_ax.loglog(lengths, [s * 1e3 for s in seconds[name]], **style)
        points = [(t, m) for t, m in zip(lengths, memory[name], strict=True) if m is not None and m > 0]
        if points:
            memory_ax.loglog(*zip(*points, strict=True), **style)
    for ax, label in ((time_ax, "forward+backward, ms"), (memory_ax, "peak memory, MiB")):
        ax.set_xlabel("sequence length T")
        ax.set_ylabel(label)
        ax.set_xticks(lengths, labels=[str(t) for t in lengths])
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, ncols=2)
    time_ax.set_title("time (log-log: the slope is the growth exponent)", fontsize=10)
    memory_ax.set_title("peak memory of one forward+backward", fontsize=10)
    fig.savefig(path)
    return path


def run_scaling(shape: ScalingShape, *, repeats: int = 3, device: str = "cpu", plot_path: Path | None = None,
                progress: Progress = no_progress, mixers: Sequence[str] | None = None) -> tuple[list[Row], None]:
    """Section E: its rows (no targets: the exponents are measured, not promised), for ``mixers`` (default
    :func:`scaled_mixers`; ``multihead`` is always measured, the baseline). On one CPU thread: on a shared
    machine two threads wait on each other between small ops, a floor that hides how the work grows with T."""
    chosen = scaled_mixers() if mixers is None else (BASELINE, *(m for m in mixers if m != BASELINE))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return scaling_rows(shape, chosen, repeats=repeats, device=device, plot_path=plot_path,
                            progress=progress), None
    finally:
        torch.set_num_threads(threads)


def scaling_rows(shape: ScalingShape, mixers: Sequence[str], *, repeats: int, device: str, plot_path: Path | None,
                 progress: Progress) -> list[Row]:
    lengths = list(shape.lengths)
    timed = time_lengths(shape, mixers, rounds=repeats, device=device, progress=progress)
    seconds = {name: [median(timed[name][t]) for t in lengths] for name in mixers}
    memory: dict[str, list[float | None]] = {name: [] for name in mixers}
    for name in mixers:
        for t in lengths:
            progress(f"E scaling: peak memory at {t} tokens · {name}")
            memory[name].append(peak_memory_mib({"name": name, "device": device, "batch": shape.batch,
                                                 "d_model": shape.d_model, "heads": shape.heads, "tokens": t}))
    rows = []
    for name in mixers:
        for t, s, m in zip(lengths, seconds[name], memory[name], strict=True):
            rows.append(Row("E", f"E/fwd+bwd/{name}/{t}", f"forward+backward · {name}, {t} tokens", s * 1e3, "ms",
                            ratio=s / seconds[BASELINE][lengths.index(t)], ratio_to=BASELINE,
                            samples=[v * 1e3 for v in timed[name][t]]))
            rows.append(Row("E", f"E/memory/{name}/{t}", f"peak memory, forward+backward · {name}, {t} tokens", m,
                            "MiB", ratio=None if m is None or not memory[BASELINE][lengths.index(t)] else
                            m / memory[BASELINE][lengths.index(t)], ratio_to=BASELINE))
    upper = len(lengths) // 2
    for name in mixers:
        theory = theory_of(name)
        rows.append(Row("E", f"E/exponent/{name}", f"growth exponent of time · {name}, {lengths[0]}..{lengths[-1]}",
                        fit_exponent(lengths, seconds[name]), "", note=theory))
        rows.append(Row("E", f"E/exponent_upper/{name}",
                        f"growth exponent of time · {name}, {lengths[upper]}..{lengths[-1]}",
                        fit_exponent(lengths[upper:], seconds[name][upper:]), "", note=theory))
    for name in mixers[1:]:
        at = crossover(lengths, seconds[name], seconds[BASELINE])
        rows.append(Row("E", f"E/crossover/{name}", f"{name} faster than multihead from T ≈", at, "tokens",
                        note="log-log interpolation between measured lengths" if at else
                        f"not within {lengths[0]}..{lengths[-1]}"))
    twinned = [name for name in TWINNED if name in mixers]
    twins = time_twins(shape, twinned, rounds=repeats, device=device, progress=progress) if twinned else {}
    for name in twinned:
        ours, twin = median(twins[name]), median(twins[f"{name}_twin"])
        rows.append(Row("E", f"E/twin/{name}", f"forward+backward · ours: {name}, {shape.twin_tokens} tokens",
                        ours * 1e3, "ms", ratio=ours / twin, ratio_to="twin", samples=[v * 1e3 for v in twins[name]]))
        rows.append(Row("E", f"E/twin/{name}_twin", f"forward+backward · twin of {name}, {shape.twin_tokens} tokens",
                        twin * 1e3, "ms", samples=[v * 1e3 for v in twins[f"{name}_twin"]]))
    if plot_path is not None:
        plot(lengths, seconds, memory, plot_path)
    return rows

