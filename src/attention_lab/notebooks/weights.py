"""Attention modules that hold a notebook's weights, built without touching the caller's RNG."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from attention_lab.attention import AttentionModule, build_attention


@contextlib.contextmanager
def seeded(seed: int) -> Iterator[None]:
    """``torch.manual_seed(seed)`` inside, the caller's RNG state untouched outside."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def blank(variant: str, **options: Any) -> AttentionModule:
    """A module whose weights are about to be overwritten: built without drawing from the caller's RNG."""
    with seeded(0):
        return build_attention(variant, **options)


def load_weights(module: AttentionModule, w_query: Tensor, w_key: Tensor, w_value: Tensor) -> AttentionModule:
    """Copy (d_out, d_in) weight matrices into a single-head module's nn.Linear layers."""
    with torch.no_grad():
        for layer, weight in ((module.W_query, w_query), (module.W_key, w_key), (module.W_value, w_value)):
            layer.weight.copy_(weight)
    return module


def projections(module: AttentionModule, x: Tensor, source: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """The module's (H, T, d) queries, keys and values of an unbatched sequence."""
    source = x if source is None else source
    q, k, v = module.project(x.unsqueeze(0), source.unsqueeze(0))
    return q[0], k[0], v[0]


def single_head(module: AttentionModule, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(T, d) queries, keys and values of a one-head module."""
    q, k, v = projections(module, x)
    return q[0], k[0], v[0]


def shape(t: Tensor) -> list[int]:
    return list(t.shape)
