"""Where a model's positions come from: the one list of position schemes (the config's ``position`` knob and
``build_attention(position=...)`` both use it). Only rope and alibi act inside attention; learned and sinusoidal
tables are added to the embeddings before it, and none is no position at all (NoPE)."""

from __future__ import annotations

from enum import Enum


class Position(str, Enum):
    none = "none"  # no position information at all (NoPE; Kazemnejad et al. 2023)
    learned = "learned"  # a trained table added to the token embeddings
    sinusoidal = "sinusoidal"  # fixed sines and cosines added to the token embeddings (Vaswani et al. 2017)
    rope = "rope"  # rotary embeddings of queries and keys inside attention (Su et al. 2021)
    alibi = "alibi"  # distance penalties on the attention scores (Press et al. 2022)


POSITIONS = tuple(p.value for p in Position)
INSIDE_ATTENTION = (Position.rope.value, Position.alibi.value)
OUTSIDE_ATTENTION = tuple(p for p in POSITIONS if p not in INSIDE_ATTENTION)
