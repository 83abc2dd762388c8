"""The CUDA subset (`make test-gpu`): every attention variant's fused fast path and weights path on CUDA against
the same module on the CPU, and short training runs with `device=cuda` / `trainer=gpu`, in float32 and under
Lightning's bf16 and fp16 autocast (`+trainer.precision=bf16-mixed`). Without CUDA every test here skips with one reason.

The CPU result is the reference: the same parameters and inputs, float32 on both sides. CUDA's fused kernels
(flash / memory-efficient SDPA) and TF32 matmuls round differently, hence the looser tolerances than the CPU
path tests (test_attention_paths.py) hold.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

from attention_lab.attention import ATTENTION_REGISTRY, VARIANTS, build_attention
from conftest import run_train_process

if not torch.cuda.is_available():  # the whole file at once: one skip line
    pytest.skip("CUDA is not available (torch.cuda.is_available() is False): the GPU tests skip",
                allow_module_level=True)

pytestmark = pytest.mark.gpu

BATCH, LENGTH, D_MODEL = 3, 11, 32
# One short real run: validation at steps 10 and 20, attention maps logged, checkpoints written.
SHORT = ["max_steps=20", "task.train_size=256", "task.val_size=64", "trainer.val_check_interval=10",
         "log_attention_every_n_steps=10"]


def variant_cases() -> list[tuple[str, dict]]:
    """Each variant with the options it takes: 4 heads (2 kv heads) where it has heads, rope and alibi where
    it projects queries and keys, a causal mask where it is self-attention."""
    cases = []
    for name in VARIANTS:
        cls = ATTENTION_REGISTRY[name]
        heads = 4 if cls.multi_head else 1
        base = dict(d_in=D_MODEL, d_out=cls.d_out_for(D_MODEL, heads), num_heads=heads,
                    causal=not cls.takes_source)
        if cls.grouped_kv:
            base["kv_heads"] = 2
        positions = [None, "rope", "alibi"] if cls.projects and not cls.takes_source else [None]
        cases += [(name, dict(base, position=position)) for position in positions]
    return cases


def case_id(case: tuple[str, dict]) -> str:
    name, options = case
    return f"{name}-{options['position'] or 'plain'}"


@pytest.mark.parametrize("need_weights", [False, True], ids=["fast_path", "weights_path"])
@pytest.mark.parametrize("case", variant_cases(), ids=case_id)
def test_cuda_matches_cpu(case, need_weights: bool):
    name, options = case
    torch.manual_seed(0)
    cpu_module = build_attention(name, **options).eval()
    cuda_module = copy.deepcopy(cpu_module).cuda()
    g = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH, LENGTH, D_MODEL, generator=g)
    source = torch.randn(BATCH, LENGTH + 2, D_MODEL, generator=g) if ATTENTION_REGISTRY[name].takes_source else None
    keys = LENGTH + 2 if source is not None else LENGTH
    padding = torch.zeros(BATCH, keys, dtype=torch.bool)
    padding[0, -3:] = True  # a padded sequence beside full ones

    with torch.no_grad():
        expected, expected_weights = cpu_module(x, source, key_padding_mask=padding, need_weights=need_weights)
        context, weights = cuda_module(x.cuda(), None if source is None else source.cuda(),
                                       key_padding_mask=padding.cuda(), need_weights=need_weights)
    assert context.is_cuda
    torch.testing.assert_close(context.cpu(), expected, atol=2e-3, rtol=2e-3)
    if need_weights:
        torch.testing.assert_close(weights.cpu(), expected_weights, atol=2e-3, rtol=2e-3)
    else:
        assert weights is None and expected_weights is None


@pytest.mark.parametrize("case", variant_cases(), ids=case_id)
def test_cuda_backward_gives_finite_gradients(case):
    name, options = case
    torch.manual_seed(0)
    module = build_attention(name, **options).cuda()
    x = torch.randn(BATCH, LENGTH, D_MODEL, device="cuda", requires_grad=True)
    source = (torch.randn(BATCH, LENGTH, D_MODEL, device="cuda")
              if ATTENTION_REGISTRY[name].takes_source else None)
    module(x, source).context.sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()
    assert all(torch.isfinite(p.grad).all() for p in module.parameters() if p.grad is not None)


def metrics_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "metrics.json").read_text())


@pytest.mark.parametrize("preset", [["device=cuda"], ["trainer=gpu"]], ids=["device_cuda", "trainer_gpu"])
def test_a_short_run_trains_on_cuda(tmp_path: Path, preset: list[str]):
    """Both settings are refused before training where CUDA is missing (run/preflight.py): a run that trained
    ran on the GPU."""
    run_dir = tmp_path / "run"
    run_train_process(run_dir, *preset, *SHORT)
    metrics = metrics_of(run_dir)
    assert metrics["global_step"] == 20 and metrics["val/loss"] > 0
    checkpoint = torch.load(run_dir / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=True)
    assert checkpoint["global_step"] == 20


@pytest.mark.parametrize("precision", ["bf16-mixed", "16-mixed"])
def test_a_short_run_trains_under_autocast(tmp_path: Path, precision: str):
    if precision == "bf16-mixed" and not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bfloat16")
    run_dir = tmp_path / "run"
    run_train_process(run_dir, "device=cuda", f"+trainer.precision={precision}", *SHORT)
    metrics = metrics_of(run_dir)
    assert metrics["global_step"] == 20
    assert torch.isfinite(torch.tensor(metrics["val/loss"])) and metrics["val/loss"] > 0
    config = (run_dir / ".hydra" / "config.yaml").read_text()
    assert f"precision: {precision}" in config
