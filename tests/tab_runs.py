"""Run dirs for the attention tab's tests, written the way the lab writes them (a torch SummaryWriter, the
tab's tensor summaries through its file writer, head scores and ablation drops as scalars), without training."""

from __future__ import annotations

from pathlib import Path

import numpy as np

XSS = "<img src=x onerror=alert(1)>"


def fake_weights(step: int, layers: int, heads: int, queries: int, keys: int) -> np.ndarray:
    """Row-normalised weights that differ at every step, layer and head."""
    rng = np.random.default_rng(step)
    raw = rng.random((layers, heads, queries, keys)) + 0.01
    return raw / raw.sum(-1, keepdims=True)


def write_run(run_dir: Path, *, steps: list[int], words: list[str], layers: int = 2, heads: int = 3,
              scalars: dict[str, list[tuple[int, float]]] | None = None, maps: bool = True,
              name: str = "version_0") -> dict[int, np.ndarray]:
    """``<run_dir>/tensorboard/<name>/events...``; returns the weights written at each step."""
    from torch.utils.tensorboard import SummaryWriter

    from attention_lab.records.probe_summary import WordLayout, probe_summary

    writer = SummaryWriter(log_dir=str(run_dir / "tensorboard" / name))
    written = {}
    try:
        for step in steps if maps else []:
            written[step] = fake_weights(step, layers, heads, len(words), len(words))
            writer.file_writer.add_summary(probe_summary(written[step], WordLayout(words, words)), step)
        for tag, points in (scalars or {}).items():
            for step, value in points:
                writer.add_scalar(tag, value, step)
        writer.add_scalar("train/loss", 1.0, 0)  # every run has some record
    finally:
        writer.close()
    return written
