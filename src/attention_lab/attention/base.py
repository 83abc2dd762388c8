"""What every attention module shares: batching, masks, positions inside attention, and the class contract."""

from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from attention_lab.attention.functional import AttentionOutput, attend
from attention_lab.attention.hooks import HookPoint
from attention_lab.attention.masks import padding_to_attn_mask
from attention_lab.attention.positions import INSIDE_ATTENTION


def check_key_padding_mask(key_padding_mask: Tensor, source: Tensor) -> None:
    # An int mask in the "1 = keep" convention would silently hide the real tokens: insist on bool.
    if key_padding_mask.dtype != torch.bool:
        raise ValueError(f"key_padding_mask must be a boolean tensor (True = padding), got {key_padding_mask.dtype}")
    expected = tuple(source.shape[:2])
    if tuple(key_padding_mask.shape) != expected:
        raise ValueError(f"key_padding_mask must have shape (B, T_k) = {expected}, got {tuple(key_padding_mask.shape)}")


class AttentionModule(nn.Module):
    """Base class: ``forward(x, source=None, *, key_padding_mask=None, need_weights=False)``.

    Subclasses implement ``project(x, source) -> (q, k, v)`` with shapes (B, H, T, d) (k and v may
    have fewer heads than q: grouped-query attention) and ``merge(context)`` (B, H, T_q, d_v) ->
    (B, T_q, output_dim). ``x`` may be (T, d_in) or (B, T, d_in): unbatched in, unbatched out
    (weights then come back as (H, T_q, T_k)).

    Every variant declares what it is, once, so that callers never need its name. The config checks read these
    declarations without importing torch (:mod:`attention_lab.attention.declared`): write them as literals.
    What follows from them (the positions and masks a variant takes) is derived in
    :mod:`attention_lab.attention.arguments`.
    """

    takes_source: ClassVar[bool]  # encoder-decoder: keys and values come from a second sequence
    multi_head: ClassVar[bool]  # accepts num_heads > 1
    grouped_kv: ClassVar[bool]  # accepts kv_heads < num_heads (grouped-query attention)
    projects: ClassVar[bool]  # has query/key projections, so rope and alibi make sense
    learned_heads: ClassVar[bool] = True  # its heads have weights of their own (something for ablations to remove)
    options: ClassVar[tuple[str, ...]] = ()  # its own build_attention keywords (e.g. normalize)
    choices: ClassVar[dict[str, tuple]] = {}  # an option's allowed values, where it has a fixed set
    rejects: ClassVar[dict[str, str]] = {}  # shared arguments it refuses (window, dropout) -> why
    # What its weights are: "softmax" (rows sum to 1) for attention; the mixers that replace it say theirs
    # ("linear", "sigmoid", "conv"). Why rope and alibi are refused when `projects` is False:
    kind: ClassVar[str] = "softmax"
    positions_note: ClassVar[str] = "it has no query/key projections"
    # A recurrence over time (a state that each position updates): it takes causal=True only (mask=causal).
    causal_only: ClassVar[bool] = False
    # What the docs' variant tables say of it (`make docs` writes them from here): where it comes from (a notebook or a
    # paper) and what it is in one line (README.md); the class docstring's first paragraph is docs/library.md's fuller
    # description. A class's own, never its base's.
    origin: ClassVar[str] = ""
    summary: ClassVar[str] = ""

    @classmethod
    def state_size(cls, d_model: int, num_heads: int, seq_len: int, kv_heads: int | None = None, **options) -> int:
        """The numbers one layer keeps to produce the next output after ``seq_len`` tokens, its recurrent state
        (Zoology's and Based's recall-memory axis), for a layer built with ``kv_heads`` and ``options`` (its
        ``build_attention`` keywords). Softmax attention keeps every key and value: the KV cache, 2·T·d, or
        2·T·kv_heads·d_h with grouped keys and values. A variant with a fixed-size state declares its own."""
        if kv_heads is None or kv_heads == num_heads:
            return 2 * seq_len * d_model
        return 2 * seq_len * kv_heads * (d_model // num_heads)

    @classmethod
    def options_before(cls, num_heads: int) -> dict[str, Any]:
        """The options it gained after runs had been saved, each with the value that builds the module those runs
        hold: a checkpoint whose config lacks one and whose weights do not fit the default is read with it
        (:meth:`attention_lab.model.TrainedModel.from_checkpoint`). None by default."""
        return {}

    @classmethod
    def d_out_for(cls, d_model: int, num_heads: int) -> int:
        """The d_out to ask for so that the output is d_model wide."""
        return d_model

    def __init__(self, *, num_heads: int = 1, kv_heads: int | None = None, causal: bool = False,
                 dropout: float = 0.0, window: int | None = None, position: str | None = None,
                 smeared_keys: bool = False) -> None:
        super().__init__()
        self.num_heads = num_heads
        self.kv_heads = num_heads if kv_heads is None else kv_heads
        self.causal = causal
        self.dropout = float(dropout)
        self.window = window
        # learned / sinusoidal / none act on the embeddings (or not at all): nothing to do in here.
        self.position = position if position in INSIDE_ATTENTION else None
        # What capture() and intervene() see and change (attention_lab.attention.hooks); no parameters.
        self.hook_scores, self.hook_weights, self.hook_head_output = HookPoint(), HookPoint(), HookPoint()
        # Each key mixed with the previous one (Olsson et al.'s smeared keys); build_attention admits it only for
        # variants with learned keys on the queries' own sequence (arguments.accepts_smeared_keys).
        self.smeared_keys = None
        if smeared_keys:
            from attention_lab.attention.smeared_keys import SmearedKeys  # imported by the models that use it

            self.smeared_keys = SmearedKeys(self.kv_heads)

    @property
    def weights_hooked(self) -> bool:
        """Whether capture() or intervene() uses the scores or the weights: a variant with its own ``attend`` then
        takes its weights path and passes them through ``hook_scores`` and ``hook_weights``."""
        return self.hook_scores.active or self.hook_weights.active

    def score_hooks(self) -> dict[str, HookPoint]:
        """``attend``'s ``on_scores`` / ``on_weights`` for the points in use: none keeps the fused kernel."""
        return {key: point for key, point in (("on_scores", self.hook_scores), ("on_weights", self.hook_weights))
                if point.active}

    def kv_cache_per_token(self) -> int | None:
        """The numbers a decoder caches per token for this layer's keys and values; None where it caches no keys
        and values (a recurrence keeps a state instead)."""
        return None

    def project(self, x: Tensor, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        raise NotImplementedError

    def merge(self, context: Tensor) -> Tensor:
        # (B, H, T_q, d_v) -> (B, T_q, H * d_v): heads side by side, as torch.cat in the notebooks.
        b, h, t, d = context.shape
        return context.transpose(1, 2).reshape(b, t, h * d)

    def position_bias(self, q: Tensor, k: Tensor) -> Tensor | None:
        """The additive score bias of the positions inside attention (ALiBi's), or None."""
        if self.position == "alibi":
            from attention_lab.attention.alibi import alibi_bias  # imported by the runs that use it, as a variant is

            return alibi_bias(q.shape[-3], q.shape[-2], k.shape[-2], device=q.device, dtype=q.dtype)
        return None

    def gate_heads(self, context: Tensor, x: Tensor) -> Tensor:
        """Each head's output (B, H, T_q, d_v) as it goes to ``hook_head_output`` and ``merge``, given the queries'
        input ``x`` (B, T_q, d_in): unchanged here (``gated`` multiplies it by a sigmoid gate of x)."""
        return context

    def logged_values(self) -> dict[str, float]:
        """Numbers of the module's own to log at each validation (``gated``'s mean gate per head): name -> value.
        A name ``a/b`` is logged as ``<variant>/a/layer<l>/b`` (``a``: as ``<variant>/a/layer<l>``)."""
        return {}

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, need_weights: bool) -> AttentionOutput:
        bias = self.position_bias(q, k)
        return attend(
            q, k, v,
            causal=self.causal,
            mask=mask,
            window=self.window,
            bias=bias,
            need_weights=need_weights,
            dropout_p=self.dropout if self.training else 0.0,
            enable_gqa=k.shape[-3] != q.shape[-3],
            **self.score_hooks(),
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

        q, k, v = self.project(x, source)  # (B, H, T_q, d_k), (B, H_kv, T_k, d_k), (B, H_kv, T_k, d_v)
        if self.smeared_keys is not None:  # before rope: the smeared key is rotated as the key of position j
            k = self.smeared_keys(k)
        if self.position == "rope":
            from attention_lab.attention.rope import apply_rope  # imported by the runs that use it, as a variant is

            q, k = apply_rope(q, k)  # per head, after the projection
        context, weights = self.attend(q, k, v, padding_to_attn_mask(key_padding_mask), need_weights)
        context = self.gate_heads(context, x)  # the head outputs that hook_head_output sees and out_proj mixes
        if self.hook_head_output.active:
            context = self.hook_head_output(context)  # (B, H, T_q, d_v), before the heads are merged
        context = self.merge(context)  # (B, T_q, output_dim)
        if unbatched:
            context = context.squeeze(0)
            weights = None if weights is None else weights.squeeze(0)
        return AttentionOutput(context, weights)
