"""What every attention module shares: argument checks, batching and masks."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attention_lab.attention.functional import AttentionOutput, attend, padding_to_attn_mask


def check_positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


def check_dropout(dropout: object) -> None:
    if isinstance(dropout, bool) or not isinstance(dropout, (int, float)) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be a number in [0, 1), got {dropout!r}")


def check_key_padding_mask(key_padding_mask: Tensor, source: Tensor) -> None:
    # An int mask in the "1 = keep" convention would silently hide the real tokens: insist on bool.
    if key_padding_mask.dtype != torch.bool:
        raise ValueError(f"key_padding_mask must be a boolean tensor (True = padding), got {key_padding_mask.dtype}")
    expected = tuple(source.shape[:2])
    if tuple(key_padding_mask.shape) != expected:
        raise ValueError(f"key_padding_mask must have shape (B, T_k) = {expected}, got {tuple(key_padding_mask.shape)}")


class AttentionModule(nn.Module):
    """Base class: ``forward(x, source=None, *, key_padding_mask=None, need_weights=False)``.

    Subclasses implement ``project(x, source) -> (q, k, v)`` with shapes (B, H, T, d) and
    ``merge(context)`` (B, H, T_q, d_v) -> (B, T_q, output_dim). ``x`` may be (T, d_in) or
    (B, T, d_in): unbatched in, unbatched out (weights then come back as (H, T_q, T_k)).
    """

    takes_source = False  # True only for encoder-decoder (cross) attention

    def __init__(self, *, causal: bool = False, dropout: float = 0.0) -> None:
        super().__init__()
        check_dropout(dropout)
        self.causal = bool(causal)
        self.dropout = float(dropout)

    def project(self, x: Tensor, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        raise NotImplementedError

    def merge(self, context: Tensor) -> Tensor:
        # (B, H, T_q, d_v) -> (B, T_q, H * d_v): heads side by side, as torch.cat in the notebooks.
        b, h, t, d = context.shape
        return context.transpose(1, 2).reshape(b, t, h * d)

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool) -> AttentionOutput:
        return attend(
            q, k, v,
            causal=self.causal,
            mask=mask,
            need_weights=need_weights,
            dropout_p=self.dropout if self.training else 0.0,
        )

    def forward(
        self,
        x: Tensor,
        source: Tensor | None = None,
        *,
        key_padding_mask: Tensor | None = None,
        need_weights: bool = False,
    ) -> AttentionOutput:
        name = type(self).__name__
        if self.takes_source and source is None:
            raise ValueError(f"{name} needs `source`: the sequence whose keys and values the queries attend to")
        if not self.takes_source and source is not None:
            raise ValueError(f"{name} is self-attention and takes no `source`; use the 'cross' variant")
        if x.dim() not in (2, 3):
            raise ValueError(f"x must be (T, d_in) or (B, T, d_in), got shape {tuple(x.shape)}")
        unbatched = x.dim() == 2
        if unbatched:
            x = x.unsqueeze(0)
            source = None if source is None else source.unsqueeze(0)
            key_padding_mask = None if key_padding_mask is None else key_padding_mask.unsqueeze(0)
        source = x if source is None else source
        if key_padding_mask is not None:
            check_key_padding_mask(key_padding_mask, source)

        q, k, v = self.project(x, source)  # (B, H, T_q, d_k), (B, H, T_k, d_k), (B, H, T_k, d_v)
        context, weights = self.attend(q, k, v, padding_to_attn_mask(key_padding_mask), need_weights)
        context = self.merge(context)  # (B, T_q, output_dim)
        if unbatched:
            context = context.squeeze(0)
            weights = None if weights is None else weights.squeeze(0)
        return AttentionOutput(context, weights)


def require_single_head(variant: str, num_heads: int) -> None:
    if num_heads != 1:
        raise ValueError(
            f"num_heads must be 1 for '{variant}' (a single head), got {num_heads}; "
            "use 'multihead' or 'multihead_concat' for several heads"
        )
