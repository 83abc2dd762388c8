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
- ``reverse``: from the i-th real position of a sequence of L real tokens to its mirror, the (L-1-i)-th: the
  anti-diagonal that a head of a model trained on ``task=reverse`` draws.
- ``first_token``: from every real position t to position 0 (the first token, ``<bos>`` with ``task.bos=true``):
  how much a head uses the first token as an attention sink (Xiao et al. 2023).
- ``prefix_matching``: Olsson et al.'s (2022) prefix-matching score, the ``induction`` pattern measured not on the
  validation batch but on a fixed probe that no task chose: random distinct words of the vocabulary, repeated
  twice (:mod:`attention_lab.analysis.prefix_matching`). ``induction`` asks whether the head reads the earlier copy in the
  task's own inputs; ``prefix_matching`` whether it does so on any repeated words.

:data:`DETECTORS` is the one definition of the kinds: :data:`HEAD_SCORE_KINDS` and everything that names a kind
(tags, config checks, ``compare.py``) derive from it, so a new kind is one function and one entry here. No torch
import (only tensor methods): the config checks read the kinds without paying for torch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from torch import Tensor

__all__ = ["head_scores"]

# weights (B, H, T, T) float, tokens (B, T), real (B, T) bool (True at non-pad tokens) -> (H,), or None when no
# query of the batch has the pattern's key.
Detector = Callable[["Tensor", "Tensor", "Tensor"], "Tensor | None"]


def masked_mean(per_query: Tensor, queries: Tensor) -> Tensor | None:
    """(B, H, T) attention per query, averaged over the queries marked in ``queries`` (B, T): (H,), or None
    when no query is marked."""
    mask = queries[:, None, :].to(per_query.dtype)
    count = mask.sum((0, 2))
    if not bool((count > 0).all()):
        return None
    return (per_query * mask).sum((0, 2)) / count


def pattern_score(weights: Tensor, pattern: Tensor, real: Tensor) -> Tensor | None:
    """The attention each query gives to the keys ``pattern`` (B, T, T) marks, averaged over the real queries
    that have a marked key: (H,)."""
    per_query = (weights * pattern[:, None].to(weights.dtype)).sum(-1)  # (B, H, T)
    return masked_mean(per_query, pattern.any(-1) & real)


def previous_token_score(weights: Tensor, tokens: Tensor, real: Tensor) -> Tensor | None:
    """Attention from t to t-1."""
    previous = weights.diagonal(offset=-1, dim1=-2, dim2=-1)  # (B, H, T-1): query t+1 -> key t
    return masked_mean(previous, real[:, 1:] & real[:, :-1])


def self_score(weights: Tensor, tokens: Tensor, real: Tensor) -> Tensor | None:
    """Attention from t to t."""
    return masked_mean(weights.diagonal(dim1=-2, dim2=-1), real)


def duplicate_pattern(tokens: Tensor, real: Tensor) -> Tensor:
    """(B, T, T) bool: key k is marked for query t when k < t holds the same real token as t."""
    t = tokens.shape[1]
    same = (tokens[:, :, None] == tokens[:, None, :]) & real[:, :, None] & real[:, None, :]  # (B, Tq, Tk)
    return same & real.new_ones((t, t)).tril(-1)  # key position < query position


def induction_pattern(tokens: Tensor, real: Tensor) -> Tensor:
    """(B, T, T) bool: key k is marked for query t when k - 1 < t holds the same real token as t."""
    earlier = duplicate_pattern(tokens, real)
    pattern = earlier.new_zeros(earlier.shape)
    pattern[:, :, 1:] = earlier[:, :, :-1]  # the position right after each earlier occurrence
    return pattern


def reverse_pattern(real: Tensor) -> Tensor:
    """(B, T, T) bool: key k is marked for query t when both are real and k is t's mirror among the real
    positions (rank(t) + rank(k) = L - 1, L the sequence's real tokens)."""
    rank = real.long().cumsum(-1) - 1  # (B, T): the position's index among the real ones
    last = real.long().sum(-1, keepdim=True) - 1  # (B, 1): L - 1
    mirrored = (rank[:, :, None] + rank[:, None, :]) == last[:, :, None]
    return mirrored & real[:, :, None] & real[:, None, :]


def induction_score(weights: Tensor, tokens: Tensor, real: Tensor) -> Tensor | None:
    """Attention from t to the position right after each earlier occurrence of t's token, over the queries whose
    token occurred earlier; none (the score is absent) when no token repeats."""
    return pattern_score(weights, induction_pattern(tokens, real), real)


def duplicate_token_score(weights: Tensor, tokens: Tensor, real: Tensor) -> Tensor | None:
    """Attention from t to the earlier occurrences of t's token, over the queries whose token occurred earlier; none
    (the score is absent) when no token repeats."""
    return pattern_score(weights, duplicate_pattern(tokens, real), real)


def reverse_score(weights: Tensor, tokens: Tensor, real: Tensor) -> Tensor | None:
    """Attention from the i-th of L real tokens to the (L−1−i)-th: the anti-diagonal of `task=reverse`."""
    return pattern_score(weights, reverse_pattern(real), real)


def first_token_score(weights: Tensor, tokens: Tensor, real: Tensor) -> Tensor | None:
    """Attention from every real position to position 0, the first token or `<bos>`: how much a head uses it as an
    attention sink."""
    return masked_mean(weights[..., 0], real)


DETECTORS: Mapping[str, Detector] = MappingProxyType({
    "previous_token": previous_token_score,
    "self": self_score,
    "induction": induction_score,
    "duplicate_token": duplicate_token_score,
    "reverse": reverse_score,
    "first_token": first_token_score,
    "prefix_matching": induction_score,
})
HEAD_SCORE_KINDS: tuple[str, ...] = tuple(DETECTORS)
# The kinds measured on the repeated random probe (attention_lab.analysis.prefix_matching), not on the validation batch.
PROBE_KINDS: frozenset[str] = frozenset({"prefix_matching"})
BATCH_KINDS: tuple[str, ...] = tuple(kind for kind in HEAD_SCORE_KINDS if kind not in PROBE_KINDS)


def head_scores(weights: Tensor, tokens: Tensor, real: Tensor,
                kinds: tuple[str, ...] = BATCH_KINDS) -> dict[str, Tensor]:
    """Every kind of ``kinds`` that has a score for this input: kind -> (H,)."""
    weights = weights.float()
    scores = {kind: DETECTORS[kind](weights, tokens, real) for kind in kinds}
    return {kind: value for kind, value in scores.items() if value is not None}
