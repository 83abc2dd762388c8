"""What each head does, measured: detectors in the style of TransformerLens's ``head_detector``.

Each score is the attention a head gives, on average over the real (non-pad) query positions, to the key a
pattern names; it lies in 0..1 (1: the head always attends there and nowhere else).

- ``previous_token``: from position t to t-1 (queries t >= 1).
- ``self``: from position t to t itself (the diagonal).
- ``induction``: from position t to the positions right after the earlier occurrences of the token at t, the
  key an induction head reads its next word from (Olsson et al. 2022). Only queries whose token occurred earlier
  count; when none does, there is no score.
- ``duplicate_token``: from position t to the earlier positions holding the same token as t (TransformerLens's
  ``duplicate_token_head``), over the same queries as ``induction``.

The kinds are declared in :mod:`attention_lab.head_metrics`, with the tags they are logged under.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attention_lab.head_metrics import HEAD_SCORE_KINDS, grid, score_family, tag

KINDS = HEAD_SCORE_KINDS


def masked_mean(per_query: Tensor, queries: Tensor) -> Tensor | None:
    """(B, H, T) attention per query, averaged over the queries marked in ``queries`` (B, T): (H,), or None
    when no query is marked."""
    mask = queries[:, None, :].to(per_query.dtype)
    count = mask.sum((0, 2))
    if not bool((count > 0).all()):
        return None
    return (per_query * mask).sum((0, 2)) / count


def previous_token_score(weights: Tensor, real: Tensor) -> Tensor | None:
    """weights (B, H, T, T), real (B, T) True at non-pad tokens -> (H,): attention from t to t-1."""
    previous = torch.diagonal(weights, offset=-1, dim1=-2, dim2=-1)  # (B, H, T-1): query t+1 -> key t
    return masked_mean(previous, real[:, 1:] & real[:, :-1])


def self_score(weights: Tensor, real: Tensor) -> Tensor | None:
    """weights (B, H, T, T), real (B, T) -> (H,): attention from t to t."""
    return masked_mean(torch.diagonal(weights, dim1=-2, dim2=-1), real)


def duplicate_pattern(tokens: Tensor, real: Tensor) -> Tensor:
    """(B, T, T) bool: key k is marked for query t when k < t holds the same real token as t."""
    t = tokens.shape[1]
    same = (tokens[:, :, None] == tokens[:, None, :]) & real[:, :, None] & real[:, None, :]  # (B, Tq, Tk)
    return same & torch.ones(t, t, dtype=torch.bool, device=tokens.device).tril(-1)  # key position < query


def induction_pattern(tokens: Tensor, real: Tensor) -> Tensor:
    """(B, T, T) bool: key k is marked for query t when k - 1 < t holds the same real token as t."""
    earlier = duplicate_pattern(tokens, real)
    pattern = torch.zeros_like(earlier)
    pattern[:, :, 1:] = earlier[:, :, :-1]  # the position right after each earlier occurrence
    return pattern


def induction_score(weights: Tensor, tokens: Tensor, real: Tensor) -> Tensor | None:
    """weights (B, H, T, T), tokens (B, T), real (B, T) -> (H,), or None when no token repeats."""
    pattern = induction_pattern(tokens, real)
    per_query = (weights * pattern[:, None].to(weights.dtype)).sum(-1)  # (B, H, T)
    return masked_mean(per_query, pattern.any(-1) & real)


def duplicate_token_score(weights: Tensor, tokens: Tensor, real: Tensor) -> Tensor | None:
    """weights (B, H, T, T), tokens (B, T), real (B, T) -> (H,), or None when no token repeats."""
    pattern = duplicate_pattern(tokens, real)
    per_query = (weights * pattern[:, None].to(weights.dtype)).sum(-1)  # (B, H, T)
    return masked_mean(per_query, pattern.any(-1) & real)


def head_scores(weights: Tensor, tokens: Tensor, real: Tensor) -> dict[str, Tensor]:
    """Every kind that has a score for this batch: kind -> (H,)."""
    weights = weights.float()
    scores = {"previous_token": previous_token_score(weights, real), "self": self_score(weights, real),
              "induction": induction_score(weights, tokens, real),
              "duplicate_token": duplicate_token_score(weights, tokens, real)}
    return {kind: value for kind, value in scores.items() if value is not None}


def score_name(kind: str, layer: int, head: int) -> str:
    """The scalar's tag, in TensorBoard and metrics.json."""
    return tag(score_family(kind), layer, head)


def score_grid(metrics: dict[str, float], kind: str) -> list[list[float]] | None:
    """The logged ``head_score/<kind>/layer{l}/head{h}`` values as a layers x heads grid (NaN where missing),
    or None when none is logged."""
    return grid(metrics, score_family(kind))
