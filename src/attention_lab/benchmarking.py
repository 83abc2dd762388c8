"""The measurements behind ``scripts/benchmark.py`` (GitHub issue 4).

A. attention kernels: our variants against PyTorch's own implementations, ch. 3's efficient-MHA setup;
B. training throughput: the framework's training (``scripts/train.py``) against a plain PyTorch loop;
C. attention-map logging overhead: the same training with the TensorBoard heatmaps on and off;
D. start-up and time to result: ``--help``, config errors, first training step, solving the default task.

Every timing is a median over rounds in which the compared cases take turns (the order rotates each
round), so that the noise of a shared machine hits all of them alike. Training runs (B, C, D) are
``scripts/train.py`` subprocesses, exactly as a user starts them, with one extra callback
(:class:`BenchmarkTimer`, added by a Hydra override) that writes its timestamps to a JSON file.
The plain loop of B runs in a subprocess too (``python -m attention_lab.benchmarking plain-loop``).
"""

from __future__ import annotations

import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn

ROOT = Path(__file__).resolve().parents[2]  # the repository (src layout)

Progress = Callable[[str], None]  # called once per measured item with a short description


def _no_progress(description: str) -> None:
    pass


@dataclass
class Row:
    """One line of the results: a measured value, its ratio to a reference and its target."""

    section: str  # "A", "B", "C" or "D"
    key: str  # stable id, e.g. "A/fwd+bwd/multihead"
    name: str  # what was measured, for people
    value: float | None  # None: not measured (the note says why)
    unit: str
    ratio: float | None = None
    ratio_to: str = ""  # what `ratio` divides by
    gflops: float | None = None  # GFLOP/s, kernels only
    target: str = ""
    ok: bool | None = None  # None: no target, or not measured
    note: str = ""
    samples: list[float] = field(default_factory=list)


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def check(value: float | None, op: str, limit: float) -> bool | None:
    if value is None or math.isnan(value):
        return None
    return value <= limit if op == "<=" else value >= limit


# ----------------------------------------------------------------------------------------------------------
# Machine


def machine_info(device: str = "cpu") -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    info: dict[str, Any] = {
        "cpu": cpu,
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch": torch.__version__,
        "lightning": L.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "torch_threads": torch.get_num_threads(),
        "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        "device": device,
    }
    if device == "cuda" and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


# ----------------------------------------------------------------------------------------------------------
# A. Attention kernels


@dataclass(frozen=True)
class KernelShape:
    batch: int
    tokens: int
    d_model: int
    heads: int
    memory_batch: int  # peak memory of fast path vs weights path, at memory_tokens
    memory_tokens: int


# Chapter 3's efficient-MHA comparison: batch 8, 1024 tokens, d=768, 12 heads, causal, float32.
FULL_KERNELS = KernelShape(batch=8, tokens=1024, d_model=768, heads=12, memory_batch=1, memory_tokens=4096)
QUICK_KERNELS = KernelShape(batch=2, tokens=128, d_model=96, heads=4, memory_batch=1, memory_tokens=512)
GEMM_SIZE = 2048


class PlainCausalMHA(nn.Module):
    """The reference: one combined qkv Linear, F.scaled_dot_product_attention(is_causal=True), out Linear."""

    def __init__(self, d_model: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d_model, 3 * d_model, bias=False)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor) -> Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        context = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(context.transpose(1, 2).reshape(b, t, d))


@dataclass
class KernelCase:
    key: str
    name: str
    module: nn.Module
    call: Callable[[Tensor], Tensor]  # x -> the output that backward starts from


def kernel_cases(shape: KernelShape, device: str) -> list[KernelCase]:
    """The seven implementations of issue 4, with the same (random, seeded) weights initialisation."""
    from attention_lab.attention import build_attention

    d, h, t = shape.d_model, shape.heads, shape.tokens
    torch.manual_seed(0)
    with torch.device(device):
        ours = build_attention("multihead", d_in=d, d_out=d, num_heads=h, causal=True)
        concat = build_attention("multihead_concat", d_in=d, d_out=d // h, num_heads=h, causal=True)
        single = build_attention("self", d_in=d, d_out=d, causal=True)
        # ch. 3 builds it like this: no q/k/v bias (bias=False also drops the out_proj bias).
        torch_mha = nn.MultiheadAttention(d, h, bias=False, batch_first=True)
        plain = PlainCausalMHA(d, h)
        # nn.MultiheadAttention's mask is True where a query may NOT attend; is_causal=True is the hint that
        # lets it call the fused kernel when no weights are needed.
        blocked = torch.ones(t, t, dtype=torch.bool).triu(1)

    def mha(need_weights: bool) -> Callable[[Tensor], Tensor]:
        def call(x: Tensor) -> Tensor:
            return torch_mha(x, x, x, attn_mask=blocked, is_causal=True, need_weights=need_weights,
                             average_attn_weights=False)[0]
        return call

    return [
        KernelCase("plain", "plain: qkv Linear + SDPA(is_causal) + Linear", plain, plain),
        KernelCase("multihead", "ours: multihead (fast path)", ours, lambda x: ours(x).context),
        KernelCase("multihead_weights", "ours: multihead, need_weights=True", ours,
                   lambda x: ours(x, need_weights=True).context),
        KernelCase("multihead_concat", "ours: multihead_concat (fast path)", concat, lambda x: concat(x).context),
        KernelCase("self", f"ours: self (one head of width {d})", single, lambda x: single(x).context),
        KernelCase("nn_mha", "torch nn.MultiheadAttention, need_weights=False", torch_mha, mha(False)),
        KernelCase("nn_mha_weights", "torch nn.MultiheadAttention, need_weights=True", torch_mha, mha(True)),
    ]


def count_flops(shape: KernelShape) -> dict[str, tuple[float, float]]:
    """(forward, backward) FLOPs of every case, counted by torch's FlopCounterMode on the meta device
    (nothing is computed). Attention counts the full T x T work, as if nothing were masked."""
    from torch.utils.flop_counter import FlopCounterMode

    flops = {}
    for case in kernel_cases(shape, "meta"):
        x = torch.empty(shape.batch, shape.tokens, shape.d_model, device="meta")
        with FlopCounterMode(display=False) as forward:
            out = case.call(x)
        with FlopCounterMode(display=False) as backward:
            out.backward(torch.empty_like(out))
        flops[case.key] = (float(forward.get_total_flops()), float(backward.get_total_flops()))
    return flops


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def _time_case(case: KernelCase, x: Tensor, grad: Tensor, device: str) -> tuple[float, float]:
    """One forward (autograd on, as in training) and its backward: (forward s, forward+backward s)."""
    for p in case.module.parameters():
        p.grad = None
    _sync(device)
    start = time.perf_counter()
    out = case.call(x)
    _sync(device)
    forward_done = time.perf_counter()
    out.backward(grad)
    _sync(device)
    end = time.perf_counter()
    return forward_done - start, end - start


def _time_gemm(a: Tensor, b: Tensor, device: str) -> float:
    _sync(device)
    start = time.perf_counter()
    torch.mm(a, b)
    _sync(device)
    return time.perf_counter() - start


def _rss_mib(field_name: str) -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field_name + ":"):
            return int(line.split()[1]) / 1024
    raise OSError(f"{field_name} not in /proc/self/status")


def peak_memory(request: dict[str, Any]) -> float | None:
    """Peak memory (MiB) that one forward of our multihead (autograd on, as in training) adds to what is
    allocated before it. CUDA: the caching allocator's peak. CPU (Linux): the resident-set high-water mark
    (VmHWM) over the resident set before the forward; run in a fresh process (see peak_memory_mib), so that
    no memory freed earlier is reused unseen."""
    from attention_lab.attention import build_attention

    device, d, heads = request["device"], request["d_model"], request["heads"]
    torch.manual_seed(0)
    module = build_attention("multihead", d_in=d, d_out=d, num_heads=heads, causal=True).to(device)
    module(torch.randn(1, 16, d, device=device), need_weights=request["need_weights"])  # first-call set-up
    x = torch.randn(request["batch"], request["tokens"], d, device=device)
    gc.collect()
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        before = torch.cuda.memory_allocated()
        out = module(x, need_weights=request["need_weights"])
        torch.cuda.synchronize()
        return (torch.cuda.max_memory_allocated() - before) / 2**20
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current resident set
        before = _rss_mib("VmRSS")
        out = module(x, need_weights=request["need_weights"])
        peak = _rss_mib("VmHWM")
    except OSError:
        return None
    del out
    return peak - before


def peak_memory_mib(request: dict[str, Any], root: Path = ROOT) -> float | None:
    """peak_memory(request) in a fresh process."""
    args = [sys.executable, "-m", "attention_lab.benchmarking", "peak-memory", json.dumps(request)]
    _, proc = run_process(args, root=root, timeout=600)
    if proc.returncode != 0:
        raise RunFailed(f"peak-memory worker exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])["peak_mib"]


def run_kernels(shape: KernelShape, *, repeats: int = 5, warmup: int = 1, device: str = "cpu",
                progress: Progress = _no_progress) -> tuple[list[Row], dict[str, Any]]:
    """Section A. Returns its rows and the targets' inputs."""
    cases = kernel_cases(shape, device)
    flops = count_flops(shape)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(shape.batch, shape.tokens, shape.d_model, generator=generator).to(device)  # same input for all
    grad = torch.randn(shape.batch, shape.tokens, shape.d_model, generator=generator).to(device)
    a = torch.randn(GEMM_SIZE, GEMM_SIZE, generator=generator).to(device)
    b = torch.randn(GEMM_SIZE, GEMM_SIZE, generator=generator).to(device)

    forward: dict[str, list[float]] = {c.key: [] for c in cases}
    both: dict[str, list[float]] = {c.key: [] for c in cases}
    gemm: list[float] = []
    slots: list[KernelCase | None] = [*cases, None]  # None: the GEMM ceiling, measured in the same rounds
    for round_index in range(warmup + repeats):
        timed = round_index >= warmup
        shift = round_index % len(slots)
        for slot in slots[shift:] + slots[:shift]:
            label = "torch.mm" if slot is None else slot.key
            progress(f"A kernels: {'round ' + str(round_index - warmup + 1) if timed else 'warm-up'} · {label}")
            if slot is None:
                samples = [_time_gemm(a, b, device) for _ in range(3)]
                if timed:
                    gemm.extend(samples)
                continue
            f, fb = _time_case(slot, x, grad, device)
            if timed:
                forward[slot.key].append(f)
                both[slot.key].append(fb)

    gemm_s = median(gemm)
    gemm_rate = 2 * GEMM_SIZE**3 / gemm_s / 1e9
    rows = [Row("A", "A/gemm", f"torch.mm {GEMM_SIZE}x{GEMM_SIZE} float32 (the machine's ceiling)", gemm_s * 1e3,
                "ms", gflops=gemm_rate, samples=[s * 1e3 for s in gemm])]
    plain_f, plain_fb = median(forward["plain"]), median(both["plain"])
    for case in cases:
        f_flops, b_flops = flops[case.key]
        f, fb = median(forward[case.key]), median(both[case.key])
        rows.append(Row("A", f"A/fwd/{case.key}", f"forward · {case.name}", f * 1e3, "ms", ratio=f / plain_f,
                        ratio_to="plain", gflops=f_flops / f / 1e9, samples=[s * 1e3 for s in forward[case.key]]))
        rows.append(Row("A", f"A/fwd+bwd/{case.key}", f"forward+backward · {case.name}", fb * 1e3, "ms",
                        ratio=fb / plain_fb, ratio_to="plain", gflops=(f_flops + b_flops) / fb / 1e9,
                        samples=[s * 1e3 for s in both[case.key]]))

    # Peak memory of one forward with autograd on (what training keeps for backward, plus transients).
    del cases, x, grad, a, b
    memory = {}
    for key, need_weights in (("multihead", False), ("multihead_weights", True)):
        progress(f"A kernels: peak memory at {shape.memory_tokens} tokens · {key}")
        memory[key] = peak_memory_mib({"device": device, "d_model": shape.d_model, "heads": shape.heads,
                                       "batch": shape.memory_batch, "tokens": shape.memory_tokens,
                                       "need_weights": need_weights})
    weights_mib = 4 * shape.memory_batch * shape.heads * shape.memory_tokens**2 / 2**20
    unit_note = ("GPU allocator peak" if device == "cuda"
                 else "resident-set high-water mark in a fresh process; autograd on")
    fast, slow = memory["multihead"], memory["multihead_weights"]
    rows.append(Row("A", "A/memory/multihead", f"peak memory, forward · ours: multihead (fast path), "
                    f"batch {shape.memory_batch}, {shape.memory_tokens} tokens", fast, "MiB", note=unit_note))
    rows.append(Row("A", "A/memory/multihead_weights", f"peak memory, forward · ours: multihead, need_weights=True, "
                    f"batch {shape.memory_batch}, {shape.memory_tokens} tokens", slow, "MiB",
                    ratio=None if not fast or slow is None else slow / fast, ratio_to="fast path",
                    note=f"{unit_note}; one (B, H, T, T) float32 map = {weights_mib:.0f} MiB"))

    ours_fb = median(both["multihead"])
    targets = {
        "fwd+bwd vs plain": ours_fb / plain_fb,
        "fwd+bwd vs nn_mha": ours_fb / median(both["nn_mha"]),
        "fwd GEMM fraction": (flops["multihead"][0] / median(forward["multihead"]) / 1e9) / gemm_rate,
    }
    return rows, targets


# ----------------------------------------------------------------------------------------------------------
# Training runs: the framework (scripts/train.py + BenchmarkTimer) and the plain loop


class BenchmarkTimer(L.Callback):
    """Timestamps of one training run, written to ``path`` (JSON) at the end of fit.

    Added to a run by Hydra overrides (see :func:`timer_overrides`). Training throughput is measured
    from the start of batch ``warmup_steps`` to the end of the last batch, minus the validation
    intervals in between (from validation start to the next training batch: validation, checkpointing
    and early stopping). The AttentionMapLogger's ``log_maps`` is wrapped to time each logging event."""

    def __init__(self, path: str, warmup_steps: int = 10) -> None:
        self.path = Path(path)
        self.warmup_steps = warmup_steps
        self.batches_started = 0
        self.steps = 0
        self.window_start: float | None = None
        self.window_start_cpu: float | None = None
        self.last_batch_end_cpu: float | None = None
        self.validation_start_cpu: float | None = None
        self.validation_cpu_s = 0.0
        self.last_batch_end: float | None = None
        self.validation_start: float | None = None
        self.validation_s = 0.0
        self.validations = 0
        self.first_step_wall: float | None = None
        self.train_start_wall: float | None = None
        self.first_batch_wall: float | None = None
        self.solved_wall: float | None = None
        self.solved_step: int | None = None
        self.fit_start: float | None = None
        self.fit_start_cpu: float | None = None
        self.fit_start_wall: float | None = None
        self.map_events: list[float] = []  # training-thread time of each map logging event
        self.map_waits: list[float] = []  # time the training thread waited for background drawing
        self.best_seq_acc: float | None = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        from attention_lab.callbacks import AttentionMapLogger

        for callback in trainer.callbacks:
            if isinstance(callback, AttentionMapLogger) and not hasattr(callback, "_benchmark_wrapped"):
                callback.log_maps = self._timed(callback, callback.log_maps)
                if hasattr(callback, "wait"):  # the heatmaps drawn in the background, waited for at the end
                    callback.wait = self._timed_wait(callback.wait)
                callback._benchmark_wrapped = True

    def _timed_wait(self, wait: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return wait(*args, **kwargs)
            finally:
                self.map_waits.append(time.perf_counter() - start)

        return timed

    def _timed(self, callback: Any, log_maps: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            logged_before = getattr(callback, "_last_logged_step", None)
            start = time.perf_counter()
            try:
                return log_maps(*args, **kwargs)
            finally:  # counted when something was logged (not for a step already logged)
                if getattr(callback, "_last_logged_step", None) != logged_before:
                    self.map_events.append(time.perf_counter() - start)

        return timed

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.fit_start = time.perf_counter()
        self.fit_start_cpu = time.process_time()
        self.fit_start_wall = time.time()

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.train_start_wall = time.time()

    def on_train_batch_start(self, trainer: L.Trainer, pl_module: L.LightningModule, batch: Any, batch_idx: int) -> None:
        now, cpu = time.perf_counter(), time.process_time()
        if self.first_batch_wall is None:
            self.first_batch_wall = time.time()
        if self.batches_started == self.warmup_steps:
            self.window_start, self.window_start_cpu = now, cpu
        if self.validation_start is not None:
            if self.window_start is not None:
                self.validation_s += now - self.validation_start
                self.validation_cpu_s += cpu - self.validation_start_cpu
            self.validation_start = None
        self.batches_started += 1

    def on_train_batch_end(self, trainer: L.Trainer, pl_module: L.LightningModule, outputs: Any, batch: Any,
                           batch_idx: int) -> None:
        self.last_batch_end, self.last_batch_end_cpu = time.perf_counter(), time.process_time()
        self.steps += 1
        if self.first_step_wall is None:
            self.first_step_wall = time.time()

    def on_validation_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not trainer.sanity_checking:
            self.validation_start, self.validation_start_cpu = time.perf_counter(), time.process_time()

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        self.validations += 1
        value = trainer.callback_metrics.get("val/seq_acc")
        if value is None:
            return
        value = float(value)
        self.best_seq_acc = value if self.best_seq_acc is None else max(self.best_seq_acc, value)
        if value >= 0.99 and self.solved_wall is None:
            self.solved_wall = time.time()
            self.solved_step = trainer.global_step

    def on_fit_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        window_steps = self.steps - self.warmup_steps
        train_s = train_cpu_s = None
        if self.window_start is not None and self.last_batch_end is not None and window_steps > 0:
            train_s = self.last_batch_end - self.window_start - self.validation_s
            train_cpu_s = self.last_batch_end_cpu - self.window_start_cpu - self.validation_cpu_s
        result = {
            "steps": self.steps,
            "window_steps": window_steps,
            "train_s": train_s,
            "steps_per_s": window_steps / train_s if train_s else None,
            "train_cpu_s": train_cpu_s,
            "steps_per_cpu_s": window_steps / train_cpu_s if train_cpu_s else None,
            "validation_s": self.validation_s,
            "validations": self.validations,
            "fit_s": time.perf_counter() - self.fit_start if self.fit_start is not None else None,
            "fit_cpu_s": time.process_time() - self.fit_start_cpu if self.fit_start_cpu is not None else None,
            "fit_start_wall": self.fit_start_wall,
            "train_start_wall": self.train_start_wall,
            "first_batch_wall": self.first_batch_wall,
            "first_step_wall": self.first_step_wall,
            "solved_wall": self.solved_wall,
            "solved_step": self.solved_step,
            "best_seq_acc": self.best_seq_acc,
            "map_events_s": self.map_events,
            "map_waits_s": self.map_waits,
            "torch_threads": torch.get_num_threads(),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
        }
        self.path.write_text(json.dumps(result, indent=2))


def timer_overrides(path: Path, warmup_steps: int) -> list[str]:
    return ["+callbacks.benchmark_timer._target_=attention_lab.benchmarking.BenchmarkTimer",
            f"+callbacks.benchmark_timer.path={path}",
            f"+callbacks.benchmark_timer.warmup_steps={warmup_steps}"]


class RunFailed(RuntimeError):
    pass


def run_process(args: list[str], *, root: Path = ROOT, env: dict[str, str] | None = None,
                timeout: float = 900) -> tuple[float, subprocess.CompletedProcess]:
    """(wall seconds, completed process) of one subprocess, timed from just before it is started."""
    start = time.perf_counter()
    proc = subprocess.run(args, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    return time.perf_counter() - start, proc


def run_framework(overrides: list[str], *, workdir: Path, warmup_steps: int, root: Path = ROOT,
                  env: dict[str, str] | None = None, timeout: float = 900) -> dict[str, Any]:
    """scripts/train.py with ``overrides`` (+ the timer) in a fresh run dir; the timer's JSON, plus
    ``process_s`` (whole process) and the wall-clock ``process_start`` these are relative to."""
    workdir.mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix="run-", dir=workdir)) / "run"
    timer_path = run_dir.with_name("timer.json")
    args = [sys.executable, str(root / "scripts" / "train.py"), *overrides, f"hydra.run.dir={run_dir}",
            *timer_overrides(timer_path, warmup_steps)]
    started_wall = time.time()
    wall, proc = run_process(args, root=root, env=env, timeout=timeout)
    if proc.returncode != 0 or not timer_path.is_file():
        raise RunFailed(f"scripts/train.py {' '.join(overrides)} exited {proc.returncode}:\n"
                        f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    result = json.loads(timer_path.read_text())
    result.update(process_s=wall, process_start=started_wall, run_dir=str(run_dir))
    for key in ("fit_start", "train_start", "first_batch", "first_step", "solved"):
        stamp = result.get(f"{key}_wall")
        result[f"{key}_after_start_s"] = None if stamp is None else stamp - started_wall
    return result


def compose_train_config(overrides: list[str], root: Path = ROOT):
    """The training config that scripts/train.py would compose from these overrides."""
    from hydra import compose, initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from attention_lab.config import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(root / "configs"), version_base="1.3"):
        return compose("train", overrides=overrides)


def plain_loop(overrides: list[str], *, steps: int, warmup_steps: int, device: str = "cpu",
               root: Path = ROOT) -> dict[str, Any]:
    """A plain PyTorch training loop on the same SequenceModel, data, batch size, optimizer (AdamW, same
    lr and weight decay), gradient clipping and determinism setting as the framework's run."""
    from attention_lab.data.corpus import PAD_ID
    from attention_lab.data.datamodule import SentenceTaskDataModule
    from attention_lab.model import SequenceModel

    cfg = compose_train_config(overrides, root)
    task, model_cfg, block = cfg.task, cfg.model, cfg.block
    if cfg.trainer.get("deterministic"):
        torch.use_deterministic_algorithms(True)
    torch.manual_seed(cfg.seed)
    data = SentenceTaskDataModule(task.name, corpus=task.corpus, min_len=task.min_len, max_len=task.max_len,
                                  train_size=task.train_size, val_size=task.val_size, batch_size=cfg.batch_size,
                                  seed=cfg.seed)
    data.setup("fit")
    mask = str(cfg.mask.value if hasattr(cfg.mask, "value") else cfg.mask)
    model = SequenceModel(len(data.vocab), attention=model_cfg.name, d_model=model_cfg.d_model,
                          num_heads=model_cfg.num_heads, layers=model_cfg.layers,
                          context_length=model_cfg.context_length, causal=mask == "causal",
                          dropout=model_cfg.dropout, qkv_bias=model_cfg.qkv_bias, normalize=model_cfg.normalize,
                          residual=block.residual, layer_norm=block.layer_norm, mlp=block.mlp,
                          mlp_ratio=block.mlp_ratio).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    clip = cfg.trainer.get("gradient_clip_val")
    model.train()
    step, window_start, window_start_cpu = 0, 0.0, 0.0
    while step < steps:
        for inputs, targets in data.train_dataloader():
            if step == warmup_steps:
                _sync(device)
                window_start, window_start_cpu = time.perf_counter(), time.process_time()
            inputs, targets = inputs.to(device), targets.to(device)
            padding = inputs == PAD_ID if mask == "padding" else None
            logits, _ = model(inputs, key_padding_mask=padding)
            loss = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=PAD_ID)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            step += 1
            if step == steps:
                break
    _sync(device)
    train_s, train_cpu_s = time.perf_counter() - window_start, time.process_time() - window_start_cpu
    return {"kind": "plain", "steps": steps, "window_steps": steps - warmup_steps, "train_s": train_s,
            "steps_per_s": (steps - warmup_steps) / train_s, "train_cpu_s": train_cpu_s,
            "steps_per_cpu_s": (steps - warmup_steps) / train_cpu_s, "torch_threads": torch.get_num_threads(),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}


def run_plain_loop(overrides: list[str], *, steps: int, warmup_steps: int, workdir: Path, device: str = "cpu",
                   threads: int | None = None, root: Path = ROOT, env: dict[str, str] | None = None,
                   timeout: float = 900) -> dict[str, Any]:
    """plain_loop() in a fresh process (imports and thread pools as a training run has them)."""
    workdir.mkdir(parents=True, exist_ok=True)
    out = Path(tempfile.mkstemp(prefix="plain-", suffix=".json", dir=workdir)[1])
    request = {"overrides": overrides, "steps": steps, "warmup_steps": warmup_steps, "device": device,
               "threads": threads, "root": str(root), "out": str(out)}
    args = [sys.executable, "-m", "attention_lab.benchmarking", "plain-loop", json.dumps(request)]
    wall, proc = run_process(args, root=root, env=env, timeout=timeout)
    if proc.returncode != 0:
        raise RunFailed(f"plain loop exited {proc.returncode}:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    result = json.loads(out.read_text())
    result["process_s"] = wall
    return result


def _plain_loop_main(request: dict[str, Any]) -> None:
    if request.get("threads"):
        torch.set_num_threads(int(request["threads"]))
    result = plain_loop(request["overrides"], steps=request["steps"], warmup_steps=request["warmup_steps"],
                        device=request["device"], root=Path(request["root"]))
    Path(request["out"]).write_text(json.dumps(result, indent=2))


# ----------------------------------------------------------------------------------------------------------
# B, C, D: the training runs (shared), throughput, logging overhead, start-up and time to result


@dataclass(frozen=True)
class TrainingPlan:
    max_steps: int | None  # None: the default run, until early stopping finds the task solved
    warmup_steps: int  # steps not counted in the throughput window
    rounds: int  # each round: framework with maps, framework without maps, plain loop (order rotates)


FULL_TRAINING = TrainingPlan(max_steps=None, warmup_steps=20, rounds=3)
QUICK_TRAINING = TrainingPlan(max_steps=30, warmup_steps=5, rounds=1)
MAPS_OFF = "~callbacks.attention_maps"


def child_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


def run_training(plan: TrainingPlan, *, sections: str, device: str = "cpu", workdir: Path, root: Path = ROOT,
                 progress: Progress = _no_progress) -> dict[str, list[dict]]:
    """The training runs of B, C and D: ``python scripts/train.py device=<device>`` (the default run; with
    --quick, max_steps=30), with and without the attention maps, and the plain loop for as many steps.
    Returns the runs by kind: maps_on (always: B, C and D use it), maps_off (C), plain (B)."""
    base = [f"device={device}"] + ([f"max_steps={plan.max_steps}"] if plan.max_steps else [])
    kinds = ["maps_on"] + (["maps_off"] if "C" in sections else []) + (["plain"] if "B" in sections else [])
    runs: dict[str, list[dict]] = {k: [] for k in kinds}
    settings: dict[str, Any] = {}  # the framework's thread settings and step count, copied by the plain loop
    for round_index in range(plan.rounds):
        shift = round_index % len(kinds)
        order = kinds[shift:] + kinds[:shift]
        if not settings and order[0] == "plain":
            order = [*order[1:], order[0]]
        for kind in order:
            progress(f"training runs: round {round_index + 1}/{plan.rounds} · {kind.replace('_', ' ')}")
            if kind == "plain":
                policy = settings["omp_wait_policy"]
                env = child_env(OMP_WAIT_POLICY=policy) if policy else child_env()
                runs[kind].append(run_plain_loop(base, steps=settings["steps"], warmup_steps=plan.warmup_steps,
                                                 workdir=workdir, device=device, threads=settings["torch_threads"],
                                                 root=root, env=env))
            else:
                result = run_framework(base + ([MAPS_OFF] if kind == "maps_off" else []), workdir=workdir,
                                       warmup_steps=plan.warmup_steps, root=root, env=child_env())
                result["kind"] = kind
                if not settings:
                    settings = {k: result[k] for k in ("steps", "torch_threads", "omp_wait_policy")}
                runs[kind].append(result)
    return runs


def throughput_rows(runs: dict[str, list[dict]], plan: TrainingPlan) -> tuple[list[Row], dict[str, Any]]:
    """Section B. The ratio is the median over rounds of framework / plain loop within a round (the runs of
    a round are back to back, so a change in the machine's load hits both); per CPU-second as well, which
    other processes on the machine hardly change."""
    on, plain = runs["maps_on"], runs["plain"]
    rate, plain_rate = median([r["steps_per_s"] for r in on]), median([r["steps_per_s"] for r in plain])
    ratio = median([f["steps_per_s"] / p["steps_per_s"] for f, p in zip(on, plain, strict=True)])
    cpu_rate, plain_cpu_rate = median([r["steps_per_cpu_s"] for r in on]), median([r["steps_per_cpu_s"] for r in plain])
    cpu_ratio = median([f["steps_per_cpu_s"] / p["steps_per_cpu_s"] for f, p in zip(on, plain, strict=True)])
    window = f"steps {plan.warmup_steps + 1}-{on[0]['steps']}, validation excluded"
    rows = [Row("B", "B/framework", "framework: scripts/train.py (default model, logging as configured)", rate,
                "steps/s", ratio=ratio, ratio_to="plain loop", note=f"{window}; ratio: median of per-round ratios",
                samples=[r["steps_per_s"] for r in on])]
    if runs.get("maps_off"):
        off = runs["maps_off"]
        off_ratio = median([f["steps_per_s"] / p["steps_per_s"] for f, p in zip(off, plain, strict=True)])
        rows.append(Row("B", "B/framework_no_maps", f"framework without the attention maps ({MAPS_OFF})",
                        median([r["steps_per_s"] for r in off]), "steps/s", ratio=off_ratio, ratio_to="plain loop",
                        note=window, samples=[r["steps_per_s"] for r in off]))
    rows += [
        Row("B", "B/plain", "plain PyTorch loop: same SequenceModel, data, batch, AdamW, clipping", plain_rate,
            "steps/s", note=f"{window}; {plain[0]['torch_threads']} torch threads, as the framework",
            samples=[r["steps_per_s"] for r in plain]),
        Row("B", "B/framework_cpu", "framework, per CPU-second (all threads)", cpu_rate, "steps/CPU-s", ratio=cpu_ratio,
            ratio_to="plain loop", note="CPU time: hardly changed by the other processes of a shared machine",
            samples=[r["steps_per_cpu_s"] for r in on]),
        Row("B", "B/plain_cpu", "plain loop, per CPU-second (all threads)", plain_cpu_rate, "steps/CPU-s",
            samples=[r["steps_per_cpu_s"] for r in plain]),
    ]
    return rows, {"throughput ratio": ratio, "throughput ratio (CPU time)": cpu_ratio}


def logging_rows(runs: dict[str, list[dict]]) -> tuple[list[Row], dict[str, Any]]:
    """Section C: the same training with the attention maps on and off. The overhead is the median over
    rounds of fit(on) / fit(off) - 1, the two runs of a round back to back; in CPU time as well (all
    threads: TensorBoard's writer thread checksums every record). Inside each maps-on run, the time the
    training thread spends in the map logger is measured too."""
    on, off = runs["maps_on"], runs["maps_off"]
    pairs = list(zip(on, off, strict=True))
    overhead = median([a["fit_s"] / b["fit_s"] - 1 for a, b in pairs])
    cpu_overhead = median([a["fit_cpu_s"] / b["fit_cpu_s"] - 1 for a, b in pairs])
    first = [r["map_events_s"][0] for r in on if r["map_events_s"]]
    later = [e for r in on for e in r["map_events_s"][1:]]

    def blocked(run: dict) -> float:  # the training thread's time in the map logger
        return sum(run["map_events_s"]) + sum(run.get("map_waits_s", []))

    share = median([blocked(r) / r["fit_s"] for r in on])
    per_run = median([len(r["map_events_s"]) for r in on])
    steps = on[0]["steps"]
    rows = [
        Row("C", "C/maps_on", f"fit wall time, attention maps on (as configured), {steps} steps",
            median([r["fit_s"] for r in on]), "s", samples=[r["fit_s"] for r in on]),
        Row("C", "C/maps_off", f"fit wall time, attention maps off ({MAPS_OFF}), {steps} steps",
            median([r["fit_s"] for r in off]), "s", samples=[r["fit_s"] for r in off]),
        Row("C", "C/overhead", "overhead: fit wall time on / off - 1", overhead * 100, "%",
            target="<= 5 %", ok=check(overhead, "<=", 0.05), note="median of the per-round ratios",
            samples=[(a["fit_s"] / b["fit_s"] - 1) * 100 for a, b in pairs]),
        Row("C", "C/overhead_cpu", "overhead in CPU time (all threads): on / off - 1", cpu_overhead * 100, "%",
            samples=[(a["fit_cpu_s"] / b["fit_cpu_s"] - 1) * 100 for a, b in pairs]),
        Row("C", "C/first_event", "first logging event (draws the static frame of the heatmaps once)",
            median(first) * 1e3 if first else None, "ms", samples=[e * 1e3 for e in first]),
        Row("C", "C/event", f"later logging events (8 heatmaps + predictions), {per_run - 1:.0f} per run",
            median(later) * 1e3 if later else None, "ms", samples=[e * 1e3 for e in later]),
        Row("C", "C/share", "time in the map logger / fit wall time, same run", share * 100, "%",
            samples=[blocked(r) / r["fit_s"] * 100 for r in on],
            note="without TensorBoard's writer thread, which checksums the PNGs in pure Python"),
    ]
    return rows, {"logging overhead": overhead, "logging overhead (CPU)": cpu_overhead, "logging share": share}


def run_startup(*, repeats: int, device: str = "cpu", root: Path = ROOT, progress: Progress = _no_progress
                ) -> dict[str, list[float]]:
    """Section D's short commands, taking turns over ``repeats`` rounds: wall seconds of each."""
    commands = startup_commands(str(root / "scripts" / "train.py"), device)
    times: dict[str, list[float]] = {k: [] for k in commands}
    for round_index in range(max(1, repeats)):
        keys = list(commands)
        shift = round_index % len(keys)
        for key in keys[shift:] + keys[:shift]:
            progress(f"start-up: round {round_index + 1}/{repeats} · {key.replace('_', ' ')}")
            _, args, expected = commands[key]
            wall, proc = run_process(args, root=root, env=child_env())
            if (proc.returncode == 0) != (expected == 0):
                raise RunFailed(f"{' '.join(args[1:])}: exit status {proc.returncode}\n"
                                f"{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
            times[key].append(wall)
    return times


def startup_commands(train: str, device: str) -> dict[str, tuple[str, list[str], int]]:
    """key -> (label, argv, expected exit status: 0 or non-zero)."""
    return {
        "help": ("python scripts/train.py --help", [sys.executable, train, "--help"], 0),
        "config_error": ("config error, cross-field rule: python scripts/train.py heads=5",
                         [sys.executable, train, "heads=5", f"device={device}"], 1),
        "type_error": ("config error, wrong type: python scripts/train.py d_model=wide",
                       [sys.executable, train, "d_model=wide", f"device={device}"], 1),
        "import_lightning": ("reference: python -c 'import lightning' (a floor for any training start)",
                             [sys.executable, "-c", "import lightning"], 0),
    }


def startup_rows(times: dict[str, list[float]], runs: dict[str, list[dict]], plan: TrainingPlan
                 ) -> tuple[list[Row], dict[str, Any]]:
    """Section D."""
    rows: list[Row] = []
    targets: dict[str, Any] = {}
    for key, (label, _, _) in startup_commands("scripts/train.py", "cpu").items():
        value = median(times[key])
        is_target = key != "import_lightning"
        rows.append(Row("D", f"D/{key}", label, value, "s", target="<= 2.5 s" if is_target else "",
                        ok=check(value, "<=", 2.5) if is_target else None, samples=times[key]))
        if is_target:
            targets[key] = value
    framework = [r for kind in ("maps_on", "maps_off") for r in runs.get(kind, [])]
    first_steps = [r["first_step_after_start_s"] for r in framework if r.get("first_step_after_start_s") is not None]
    first_step = median(first_steps) if first_steps else None
    targets["first step"] = first_step
    rows.append(Row("D", "D/first_step", "process start -> first training step done (scripts/train.py)", first_step,
                    "s", target="<= 6 s", ok=check(first_step, "<=", 6.0), samples=first_steps,
                    note=f"median of {len(first_steps)} training runs"))
    on = runs.get("maps_on", [])
    if plan.max_steps is not None or not on:  # --quick: short runs, not the default one
        rows.append(Row("D", "D/time_to_result", "default run: start -> validation seq_acc >= 0.99", None, "s",
                        target="<= 30 s", note=f"skipped by --quick (runs of max_steps={plan.max_steps})"
                        if on else "no training run"))
        rows.append(Row("D", "D/default_run", "default run: whole process", None, "s",
                        note="skipped by --quick" if on else "no training run"))
        return rows, targets
    solved = [r["solved_after_start_s"] for r in on]
    value = median([s if s is not None else math.inf for s in solved])
    value = None if math.isinf(value) else value
    targets["time to result"] = value
    steps = sorted({r["solved_step"] for r in on if r["solved_step"] is not None})
    note = (f"median of {len(on)} runs; solved at step {', '.join(map(str, steps))}" if value is not None
            else f"not reached: best val/seq_acc {max((r['best_seq_acc'] or 0) for r in on):.3f}")
    rows.append(Row("D", "D/time_to_result", "default run: start -> validation seq_acc >= 0.99", value, "s",
                    target="<= 30 s", ok=check(value, "<=", 30.0) if value is not None else False, note=note,
                    samples=[s for s in solved if s is not None]))
    rows.append(Row("D", "D/default_run", "default run: whole process (early stop, final validation, exit)",
                    median([r["process_s"] for r in on]), "s", samples=[r["process_s"] for r in on],
                    note=f"{on[0]['steps']} steps; {on[0]['torch_threads']} torch threads, "
                         f"OMP_WAIT_POLICY={on[0]['omp_wait_policy'] or 'unset'}"))
    return rows, targets


# ----------------------------------------------------------------------------------------------------------
# Targets of issue 4


def target_rows(a: dict[str, Any] | None, b: dict[str, Any] | None, c: dict[str, Any] | None,
                d: dict[str, Any] | None) -> list[Row]:
    rows: list[Row] = []
    if a:
        rows += [
            Row("A", "target/A/fwd+bwd_vs_plain", "ours multihead fwd+bwd / plain module", a["fwd+bwd vs plain"], "x",
                target="<= 1.05", ok=check(a["fwd+bwd vs plain"], "<=", 1.05)),
            Row("A", "target/A/fwd+bwd_vs_nn_mha", "ours multihead fwd+bwd / nn.MultiheadAttention(need_weights=False)",
                a["fwd+bwd vs nn_mha"], "x", target="<= 1.00", ok=check(a["fwd+bwd vs nn_mha"], "<=", 1.0)),
            Row("A", "target/A/fwd_gemm_fraction", "ours multihead forward GFLOP/s / same-run GEMM GFLOP/s",
                a["fwd GEMM fraction"], "x", target=">= 0.90", ok=check(a["fwd GEMM fraction"], ">=", 0.9)),
        ]
    if b:
        rows.append(Row("B", "target/B/throughput", "framework steps/s / plain loop steps/s", b["throughput ratio"],
                        "x", target=">= 0.80", ok=check(b["throughput ratio"], ">=", 0.8),
                        note=f"per CPU-second: {b['throughput ratio (CPU time)']:.2f}x"))
    if c:
        rows.append(Row("C", "target/C/overhead", "attention maps on vs off: fit wall-time overhead",
                        c["logging overhead"] * 100, "%", target="<= 5 %", ok=check(c["logging overhead"], "<=", 0.05),
                        note=f"CPU time {c['logging overhead (CPU)'] * 100:+.1f} %; training thread in the "
                             f"logger {c['logging share'] * 100:.1f} %"))
    if d:
        for key, label in (("help", "train.py --help"), ("config_error", "config error (cross-field rule)"),
                           ("type_error", "config error (wrong type)")):
            if key in d:
                rows.append(Row("D", f"target/D/{key}", label, d[key], "s", target="<= 2.5 s", ok=check(d[key], "<=", 2.5)))
        rows.append(Row("D", "target/D/first_step", "start -> first training step", d.get("first step"), "s",
                        target="<= 6 s", ok=check(d.get("first step"), "<=", 6.0)))
        if "time to result" in d:
            value = d["time to result"]
            rows.append(Row("D", "target/D/time_to_result", "default run: start -> val seq_acc >= 0.99", value, "s",
                            target="<= 30 s", ok=check(value, "<=", 30.0) if value is not None else False))
    return rows


def rows_to_json(rows: Sequence[Row]) -> list[dict[str, Any]]:
    return [asdict(r) for r in rows]


if __name__ == "__main__":  # the subprocesses of scripts/benchmark.py
    if len(sys.argv) == 3 and sys.argv[1] == "plain-loop":
        _plain_loop_main(json.loads(sys.argv[2]))
    elif len(sys.argv) == 3 and sys.argv[1] == "peak-memory":
        print(json.dumps({"peak_mib": peak_memory(json.loads(sys.argv[2]))}))
    else:
        sys.exit("usage: python -m attention_lab.benchmarking plain-loop|peak-memory '<json request>'")
