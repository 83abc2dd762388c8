"""Section A: our attention modules against PyTorch's own and against hand-written SDPA twins.

Every case is timed with ``torch.utils.benchmark.Timer.blocked_autorange`` (its block-size estimate is a
warm-up call), forward alone (autograd on, as in training) and forward+backward, on the same input. The
cases take turns in rounds whose order rotates, so that a change in the machine's load hits all of them
alike; values are medians over rounds, and every ratio divides numbers of the same run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.utils import benchmark

from benchmarks.kernel_shape import KernelShape
from benchmarks.memory import memory_rows
from benchmarks.rows import Progress, Row, median, no_progress
from benchmarks.twins import AlibiSDPA, GroupedQuerySDPA, PlainCausalMHA, RotarySDPA

GEMM_SIZE = 2048
TWIN_LIMIT = 1.10  # each variant's fwd+bwd against its hand-written twin


@dataclass
class KernelCase:
    key: str
    name: str
    module: nn.Module
    call: Callable[[Tensor], Tensor]  # x -> the output that backward starts from
    reference: str = "plain"  # the case its ratios divide by


def kv_head_counts(heads: int) -> list[int]:
    """Grouped-query settings measured: 4, 2 and 1 kv heads at 12 heads (those that divide ``heads``)."""
    return [k for k in (4, 2, 1) if heads % k == 0 and k < heads]


def variant_names(heads: int) -> dict[str, str]:
    """key -> name of every variant case: ours, then its twin."""
    names = {}
    for k in kv_head_counts(heads):
        names[f"gqa_kv{k}"] = f"ours: multihead, kv_heads={k} (grouped-query)"
        names[f"gqa_kv{k}_twin"] = f"twin: SDPA(enable_gqa), {k} kv heads"
    names.update({
        "rope": "ours: multihead, position=rope", "rope_twin": "twin: rotate-half RoPE + SDPA(is_causal)",
        "alibi": "ours: multihead, position=alibi", "alibi_twin": "twin: ALiBi bias as SDPA's float mask",
    })
    return names


def variant_keys(heads: int) -> list[tuple[str, str]]:
    """(our case, its twin) of every variant row."""
    return [(key, f"{key}_twin") for key in variant_names(heads) if not key.endswith("_twin")]


def kernel_cases(shape: KernelShape, device: str) -> list[KernelCase]:
    """Our implementations, PyTorch's, and the variants with their twins, seeded alike."""
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
        *variant_cases(shape, device),
    ]


def variant_cases(shape: KernelShape, device: str) -> list[KernelCase]:
    """Grouped-query attention, RoPE and ALiBi (fast path), each beside its hand-written SDPA twin."""
    from attention_lab.attention import build_attention

    d, h = shape.d_model, shape.heads
    names = variant_names(h)
    cases = []

    def ours(key: str, **options: Any) -> KernelCase:
        module = build_attention("multihead", d_in=d, d_out=d, num_heads=h, causal=True, **options)
        return KernelCase(key, names[key], module, lambda x: module(x).context, reference=f"{key}_twin")

    def twin(key: str, module: nn.Module) -> KernelCase:
        return KernelCase(key, names[key], module, module)

    with torch.device(device):
        for k in kv_head_counts(h):
            cases += [ours(f"gqa_kv{k}", kv_heads=k), twin(f"gqa_kv{k}_twin", GroupedQuerySDPA(d, h, k))]
        cases += [ours("rope", position="rope"), twin("rope_twin", RotarySDPA(d, h))]
        cases += [ours("alibi", position="alibi"), twin("alibi_twin", AlibiSDPA(d, h))]
    return cases


def count_flops(shape: KernelShape) -> dict[str, tuple[float, float] | None]:
    """(forward, backward) FLOPs of every case, counted by torch's FlopCounterMode on the meta device
    (nothing is computed). Attention counts the full T x T work, as if nothing were masked. None where
    the meta device cannot run a case."""
    from torch.utils.flop_counter import FlopCounterMode

    flops: dict[str, tuple[float, float] | None] = {}
    for case in kernel_cases(shape, "meta"):
        x = torch.empty(shape.batch, shape.tokens, shape.d_model, device="meta")
        try:
            with FlopCounterMode(display=False) as forward:
                out = case.call(x)
            with FlopCounterMode(display=False) as backward:
                out.backward(torch.empty_like(out))
        except (RuntimeError, NotImplementedError):  # an op without a meta kernel
            flops[case.key] = None
            continue
        flops[case.key] = (float(forward.get_total_flops()), float(backward.get_total_flops()))
    return flops


def seconds_per_call(fn: Callable[[], Any], min_run_time: float) -> float:
    """Median seconds per call of ``fn``, by torch.utils.benchmark (CUDA synchronised), on as many threads
    as torch uses here (the Timer's own default is one)."""
    timer = benchmark.Timer(stmt="fn()", globals={"fn": fn}, num_threads=torch.get_num_threads())
    return timer.blocked_autorange(min_run_time=min_run_time).median


def training_step(case: KernelCase, x: Tensor, grad: Tensor) -> Callable[[], None]:
    def step() -> None:
        case.module.zero_grad(set_to_none=True)  # as a training step: backward writes fresh gradients
        case.call(x).backward(grad)
    return step


def time_cases(cases: list[KernelCase], x: Tensor, grad: Tensor, gemm: Callable[[], Tensor], *, rounds: int,
               min_run_time: float, progress: Progress) -> tuple[dict[str, list[float]], dict[str, list[float]],
                                                                 list[float]]:
    """Per case, the forward and forward+backward seconds of every round, and the GEMM's."""
    forward: dict[str, list[float]] = {c.key: [] for c in cases}
    both: dict[str, list[float]] = {c.key: [] for c in cases}
    gemm_s: list[float] = []
    slots: list[KernelCase | None] = [*cases, None]  # None: the GEMM ceiling, measured in the same rounds
    for round_index in range(rounds):
        shift = round_index % len(slots)
        for slot in slots[shift:] + slots[:shift]:
            progress(f"A kernels: round {round_index + 1}/{rounds} · {'torch.mm' if slot is None else slot.key}")
            if slot is None:
                gemm_s.append(seconds_per_call(gemm, min_run_time))
                continue
            forward[slot.key].append(seconds_per_call(lambda case=slot: case.call(x), min_run_time))
            both[slot.key].append(seconds_per_call(training_step(slot, x, grad), min_run_time))
    return forward, both, gemm_s


def measure_cases(shape: KernelShape, *, repeats: int, device: str, progress: Progress
                  ) -> tuple[list[tuple[str, str, str]], dict[str, list[float]], dict[str, list[float]], list[float]]:
    """(key, name, reference) of every case, and the timings of time_cases. The modules and tensors are freed
    on return, before the peak-memory workers start."""
    cases = kernel_cases(shape, device)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(shape.batch, shape.tokens, shape.d_model, generator=generator).to(device)  # same input for all
    grad = torch.randn(shape.batch, shape.tokens, shape.d_model, generator=generator).to(device)
    a = torch.randn(GEMM_SIZE, GEMM_SIZE, generator=generator).to(device)
    b = torch.randn(GEMM_SIZE, GEMM_SIZE, generator=generator).to(device)
    timings = time_cases(cases, x, grad, lambda: torch.mm(a, b), rounds=repeats, min_run_time=shape.min_run_time,
                         progress=progress)
    return [(c.key, c.name, c.reference) for c in cases], *timings


def run_kernels(shape: KernelShape, *, repeats: int = 5, device: str = "cpu",
                progress: Progress = no_progress) -> tuple[list[Row], dict[str, Any]]:
    """Section A. Returns its rows and the targets' inputs."""
    flops = count_flops(shape)
    described, forward, both, gemm = measure_cases(shape, repeats=repeats, device=device, progress=progress)
    gemm_s = median(gemm)
    gemm_rate = 2 * GEMM_SIZE**3 / gemm_s / 1e9
    rows = [Row("A", "A/gemm", f"torch.mm {GEMM_SIZE}x{GEMM_SIZE} float32 (the machine's ceiling)", gemm_s * 1e3,
                "ms", gflops=gemm_rate, samples=[s * 1e3 for s in gemm])]
    for key, name, reference in described:
        rows += case_rows(key, name, reference, forward, both, flops.get(key))
    rows += memory_rows(shape, device=device, progress=progress)

    ours_fb = median(both["multihead"])
    targets: dict[str, Any] = {
        "fwd+bwd vs plain": ours_fb / median(both["plain"]),
        "fwd+bwd vs nn_mha": ours_fb / median(both["nn_mha"]),
        "fwd GEMM fraction": (flops["multihead"][0] / median(forward["multihead"]) / 1e9) / gemm_rate
        if flops.get("multihead") else None,
        "variants": {ours: (median(both[ours]) / median(both[twin]), median(forward[ours]) / median(forward[twin]))
                     for ours, twin in variant_keys(shape.heads)},
    }
    return rows, targets


def case_rows(key: str, name: str, reference: str, forward: dict[str, list[float]], both: dict[str, list[float]],
              flops: tuple[float, float] | None) -> list[Row]:
    """The forward and forward+backward rows of one case, their ratio to its reference and GFLOP/s."""
    f, fb = median(forward[key]), median(both[key])
    ratio_to = "twin" if reference.endswith("_twin") else reference
    return [
        Row("A", f"A/fwd/{key}", f"forward · {name}", f * 1e3, "ms", ratio=f / median(forward[reference]),
            ratio_to=ratio_to, gflops=flops[0] / f / 1e9 if flops else None,
            samples=[s * 1e3 for s in forward[key]]),
        Row("A", f"A/fwd+bwd/{key}", f"forward+backward · {name}", fb * 1e3, "ms",
            ratio=fb / median(both[reference]), ratio_to=ratio_to,
            gflops=(flops[0] + flops[1]) / fb / 1e9 if flops else None, samples=[s * 1e3 for s in both[key]]),
    ]

