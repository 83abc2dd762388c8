"""Encoder-decoder (cross) attention (001 ``Attention``)."""

from __future__ import annotations

from attention_lab.attention.errors import AttentionArgumentError
from attention_lab.attention.registry import register
from attention_lab.attention.self_attention import SelfAttention


@register("cross")
class CrossAttention(SelfAttention):
    """Queries from ``x`` (the decoder), keys and values from ``source`` (the encoder output).

    ``source`` may be longer or shorter than ``x``. Causal masking is rejected: it needs queries
    and keys from one sequence.
    """

    origin = "notebook 001 `Attention`"
    summary = "queries from one sequence, keys and values from another (encoder-decoder)"

    takes_source = True
    multi_head = False
    grouped_kv = False
    projects = True  # but rope and alibi are rejected: query i and key i are not at comparable positions

    def __init__(self, d_in: int, d_out: int, *, causal: bool = False, **kwargs) -> None:
        if causal:
            raise AttentionArgumentError(
                "causal", causal, "False for 'cross'",
                "causal must be False for 'cross': queries and keys come from different sequences; "
                "use key_padding_mask to hide source positions",
            )
        super().__init__(d_in, d_out, causal=False, **kwargs)
