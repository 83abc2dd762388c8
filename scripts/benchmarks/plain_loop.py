"""Section B's reference: a plain PyTorch training loop on what ``scripts/train.py`` trains.

The same SequenceModel (built from the same composed ModelConfig), datamodule, batch size, optimizer (the
config's AdamW: same lr and weight decay), gradient clipping and determinism setting; no Lightning, no
logging.

    python -m benchmarks.plain_loop '<json request>'    # what benchmarks.training starts
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from omegaconf import OmegaConf

from benchmarks.compose import compose_train_config


def sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def plain_loop(overrides: list[str], *, steps: int, warmup_steps: int, device: str = "cpu") -> dict[str, Any]:
    """Trains ``steps`` steps; times steps ``warmup_steps + 1`` to ``steps``."""
    from hydra.utils import instantiate

    from attention_lab.config import Mask
    from attention_lab.data.corpus import PAD_ID
    from attention_lab.model import SequenceModel

    cfg = compose_train_config(overrides)
    config = OmegaConf.to_object(cfg.model)  # a ModelConfig, as the LightningModule gets it
    if cfg.trainer.get("deterministic"):
        torch.use_deterministic_algorithms(True)
    torch.manual_seed(cfg.seed)
    data = instantiate(cfg.data)  # the datamodule of scripts/train.py
    data.setup("fit")
    model = SequenceModel(config, len(data.vocab)).to(device)
    optimizer = instantiate(cfg.module.optimizer)(model.parameters())  # AdamW with the run's lr, weight decay
    clip = cfg.trainer.get("gradient_clip_val")
    padding = Mask(config.mask) is Mask.padding
    model.train()
    step, epoch, window_start, window_start_cpu = 0, 0, 0.0, 0.0
    while step < steps:
        loader = data.train_dataloader()
        loader.sampler.set_epoch(epoch)  # as Lightning does before every epoch
        epoch += 1
        for inputs, targets in loader:
            if step == warmup_steps:
                sync(device)
                window_start, window_start_cpu = time.perf_counter(), time.process_time()
            inputs, targets = inputs.to(device), targets.to(device)
            logits = model(inputs, key_padding_mask=inputs == PAD_ID if padding else None)
            loss = F.cross_entropy(logits.transpose(1, 2), targets, ignore_index=PAD_ID)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimizer.step()
            step += 1
            if step == steps:
                break
    sync(device)
    train_s, train_cpu_s = time.perf_counter() - window_start, time.process_time() - window_start_cpu
    return window_result("plain", steps, warmup_steps, train_s, train_cpu_s)


def window_result(kind: str, steps: int, warmup_steps: int, train_s: float, train_cpu_s: float) -> dict[str, Any]:
    """A timed loop's record: steps/s over the window after ``warmup_steps``, wall and CPU (the floor's too)."""
    window = steps - warmup_steps
    return {"kind": kind, "steps": steps, "window_steps": window, "train_s": train_s,
            "steps_per_s": window / train_s, "train_cpu_s": train_cpu_s, "steps_per_cpu_s": window / train_cpu_s,
            "torch_threads": torch.get_num_threads(), "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY")}


def answer(request: dict[str, Any], measure) -> None:
    """Runs ``measure`` (this loop or the Lightning floor) as benchmarks.training's request asks; writes its record."""
    if request.get("threads"):
        torch.set_num_threads(int(request["threads"]))
    result = measure(request["overrides"], steps=request["steps"], warmup_steps=request["warmup_steps"],
                     device=request["device"])
    Path(request["out"]).write_text(json.dumps(result, indent=2))


def main(request: dict[str, Any]) -> None:
    answer(request, plain_loop)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m benchmarks.plain_loop '<json request>'")
    main(json.loads(sys.argv[1]))
