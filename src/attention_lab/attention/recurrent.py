"""What the recurrences over time share: ``based``, ``gated_deltanet``, ``mamba2`` and ``retnet``.

Each keeps a state per head that every position updates, whatever the length, so that:

* it is causal or nothing (``causal=True`` only), its keys and values come from the queries' own sequence, and
  its heads split one width (no grouped keys and values: each head's state is its own);
* it forms no softmax scores for rope and alibi to act on (its decay, or its window, already weighs each earlier
  position by its distance), and no map to drop entries of on its fast path, and its state carries every
  earlier position, so the shared ``window`` means nothing (``based`` says its own why);
* only whole keys can be hidden (key padding): a hidden position is skipped, its write left out of the state;
* the output is linear in the values, o = M v per head, with M the T × T map it is computed from. The weights
  path returns M and computes the output through ``hook_weights`` (no scores: ``hook_weights`` only); the fast
  path is that quadratic form up to ``chunk`` positions and a chunked form beyond, so that time grows linearly
  in T.

Three of them (those that take ``short_conv``) first pass q, k and v through a short causal depthwise convolution
and SiLU (:mod:`.short_conv`). Every head's output is mixed by ``out_proj``.
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor, nn

from attention_lab.attention.arguments import check_positive_int, check_split_heads
from attention_lab.attention.base import AttentionModule
from attention_lab.attention.functional import AttentionOutput
from attention_lab.attention.registry import ATTENTION_REGISTRY
from attention_lab.attention.short_conv import ShortCausalConv, convolve_heads

CHUNK = 64  # positions per chunk of the fast path; up to this length it computes M itself
SHORT_CONV = 4  # taps of the short convolution (Mamba-2's d_conv, fla's conv_size)


class Recurrence(AttentionModule):
    """A state per head updated at every position: W_query, W_key, W_value split into heads of one width, the
    variant's own parameters (gates, decays), a short causal convolution where it takes ``short_conv``, out_proj.

    A subclass adds its parameters in ``own_parameters`` and its mixer in ``attend``, which hands the map and the
    chunked form to ``mix``."""

    takes_source = False
    multi_head = True
    grouped_kv = False
    projects = False  # its map is not softmax(scores): rope and alibi have no scores to act on
    causal_only = True
    options = ("chunk", "short_conv")  # what __init__ takes beside the shared arguments (retnet: no convolution)
    rejects = {"window": "its state carries every earlier position", "dropout": "its fast path forms no map to drop entries of"}

    @classmethod
    def state_size(cls, d_model: int, num_heads: int, seq_len: int, short_conv: int = SHORT_CONV, **options) -> int:
        """Per head a d_h × d_h matrix (retnet's S, mamba2's h, gated_deltanet's S), whatever the length, and the
        short convolution's last ``short_conv`` − 1 inputs of the three convolved streams (0 taps, or a variant
        without the convolution: none)."""
        d_head = d_model // num_heads
        taps = short_conv if "short_conv" in cls.options else 0
        return num_heads * d_head * d_head + max(taps - 1, 0) * 3 * d_model

    def __init__(self, d_in: int, d_out: int, *, d_v: int | None = None, qkv_bias: bool = False,
                 window: int | None = None, dropout: float = 0.0, chunk: int = CHUNK, short_conv: int = SHORT_CONV,
                 head_dim: int | None = None, **common) -> None:
        # window and dropout arrive unset, causal True: build_attention refuses the rest (``rejects``, ``causal_only``).
        super().__init__(**common)
        check_split_heads(self.variant, d_out, self.num_heads, d_v)
        check_positive_int("chunk", chunk)
        self.chunk = chunk
        self.head_dim = d_out // self.num_heads if head_dim is None else head_dim  # a head's query and key width
        width = self.key_heads * self.head_dim
        self.W_query = nn.Linear(d_in, width, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, width, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)
        # Made in this order (q, k, v, the variant's own, the convolution, out_proj): a seed builds what it always built.
        self.own_parameters(d_in)
        if "short_conv" in self.options:
            self.short_conv = ShortCausalConv(2 * width + d_out, short_conv)  # q, k and v side by side
        self.out_proj = nn.Linear(d_out, d_out)
        self.output_dim = d_out

    @property
    def variant(self) -> str:
        """The name it is registered under, as its error messages call it."""
        return ATTENTION_REGISTRY.name_of(type(self)) or type(self).__name__

    @property
    def key_heads(self) -> int:
        """How many heads of queries and keys W_query and W_key make: one a head (mamba2: one a group of heads)."""
        return self.num_heads

    def own_parameters(self, d_in: int) -> None:
        """The variant's parameters beside q, k and v (its gates and decays): none here."""

    def split_heads(self, x: Tensor) -> Tensor:
        b, t, _ = x.shape  # (B, T, H * d) -> (B, H, T, d)
        return x.view(b, t, self.num_heads, -1).transpose(1, 2)

    def keys(self, source: Tensor) -> Tensor:
        """(B, T, d_in) -> (B, H, T, d): W_key's heads; a variant adds what rides along with them (its gates'
        pre-activations, decided where k_t is: attend() takes them off again)."""
        return self.split_heads(self.W_key(source))

    def project(self, x: Tensor, source: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        # The keys first, as the variants always made them: the order of the products is the order their gradients
        # reach x in, so a run sums them as it always did. (B, H, T, d), (B, H, T, d + gates), (B, H, T, d_v)
        keys = self.keys(source)
        return self.split_heads(self.W_query(x)), keys, self.split_heads(self.W_value(source))

    def merge(self, context: Tensor) -> Tensor:
        return self.out_proj(super().merge(context))  # (B, T, d_out): the heads mixed

    def check_key_mask(self, mask: Tensor | None) -> None:
        """A recurrence has no query-key pairs to mask: only whole keys, (B, 1, 1, T_k) from key padding."""
        if mask is not None and mask.shape[-2] != 1:
            raise ValueError(f"'{self.variant}' takes key masks of shape (B, 1, 1, T_k), got {tuple(mask.shape)}")

    def convolve(self, heads: tuple[Tensor, ...], mask: Tensor | None) -> tuple[Tensor, ...]:
        """(B, H, T, d) tensors through the short convolution, a hidden position's input zeroed first (it then
        reaches no later position); the key mask checked."""
        self.check_key_mask(mask)
        keep = None if mask is None else mask[:, 0].transpose(-2, -1).to(heads[-1].dtype)  # (B, T, 1)
        return convolve_heads(self.short_conv, heads, keep)

    def mix(self, implied_map: Callable[[], Tensor], v: Tensor, chunked: Callable[[], Tensor],
            need_weights: bool) -> AttentionOutput:
        """o = M v: the map itself through ``hook_weights`` on the weights path; the quadratic form up to ``chunk``
        positions, ``chunked()`` beyond. implied_map: () -> M (B, H, T, T); v: (B, H, T, d_v)."""
        if need_weights or self.weights_hooked:
            weights = self.hook_weights(implied_map())  # (B, H, T, T)
            return AttentionOutput(weights @ v, weights if need_weights else None)
        if v.shape[-2] <= self.chunk:
            return AttentionOutput(implied_map() @ v, None)
        return AttentionOutput(chunked(), None)
