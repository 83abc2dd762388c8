"""Weight-based circuits (Elhage et al. 2021, "A Mathematical Framework for Transformer Circuits"): each head's
QK and OV matrices in the residual basis, how strongly the heads of one layer compose with those of a later one,
and how much each head copies tokens. Pure functions on a model's weights: no data, no forward pass.

Row-vector convention (``x @ W``), as TransformerLens's ``FactoredMatrix`` and ``composition_scores``:

- ``W_QK = W_Q W_Kᵀ`` (d_model x d_model): the score of query x on key y is ``x W_QK yᵀ`` (up to 1/√d_head);
- ``W_OV = W_V W_O`` (d_model x d_model): what the head writes into the residual stream for a token it attends to.

The LayerNorm that the block's attention reads through has its scale folded into W_Q, W_K and W_V
(``diag(γ) W``); its bias and the projections' biases are left out, as TransformerLens does. Grouped key/value
heads are repeated for their query heads (query head i uses kv head ``i // (num_heads / kv_heads)``).

Composition of a writer head (layer a) into a reader head (layer b > a), with A = the writer's W_OV:
``‖A B‖_F / (‖A‖_F ‖B‖_F)``, B = the reader's W_QK (q), its transpose (k), or the reader's W_OV (v).

Copying: the full OV circuit ``W_E W_OV W_U`` (vocabulary x vocabulary, W_U with the final LayerNorm's scale folded
in) scored ``Σλ / Σ|λ|`` over its eigenvalues: 1 when it only copies, -1 when it only suppresses. It is computed
on ``W_OV W_U W_E`` (d_model x d_model): XY and YX share their nonzero eigenvalues, and zero eigenvalues add nothing
to either sum, so the score is the same.

Covered, layer by layer: the blocks whose attention is ``multihead`` or a variant built on its projections
(``sigmoid``, ``linear``: there the QK form is the one before the feature map), in a model without an encoder. In a
hybrid stack (``mixers=[gated_deltanet,multihead]``) only those layers are scored: copying for each of their heads,
composition for each pair of them (writer layer < reader layer, whatever lies between). Elsewhere the heads have no
per-head W_Q/W_K/W_V/W_O of that shape (a recurrence's state is not a QK/OV pair); where no layer has them,
:func:`head_circuits` returns None.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from attention_lab.analysis.layer_memory import layer_list
from attention_lab.analysis.tags import COMPOSITIONS, composition_tag, copying_tag
from attention_lab.attention.multihead import MultiHeadAttention

__all__ = ["head_circuits", "circuit_layers", "circuit_scores", "composition_score", "copying_score",
           "unmeasured_reason", "lacking_layers"]


@dataclass(frozen=True)
class HeadCircuits:
    """Every measured head's matrices, float64: ``qk[l][h]`` and ``ov[l][h]`` (d_model x d_model), keyed by the
    layers that have them (:func:`circuit_layers`); ``embed`` (vocab x d_model) and ``unembed`` (d_model x vocab)
    for the full OV circuit."""

    qk: dict[int, list[Tensor]]
    ov: dict[int, list[Tensor]]
    embed: Tensor
    unembed: Tensor


def norm_scale(norm: nn.Module, d_model: int) -> Tensor:
    """The LayerNorm's per-channel scale γ (ones where the block has no LayerNorm)."""
    weight = getattr(norm, "weight", None)
    return torch.ones(d_model, dtype=torch.float64) if weight is None else weight.detach().double()


def layer_factors(attention: MultiHeadAttention, scale: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One layer's per-head W_Q, W_K, W_V (heads, d_model, d_head), the reading LayerNorm's scale folded in and
    grouped key/value heads repeated, and W_O (heads, d_head, d_model): W_QK = W_Q W_Kᵀ, W_OV = W_V W_O."""
    d, heads, group = attention.head_dim, attention.num_heads, attention.num_heads // attention.kv_heads

    def per_head(linear: nn.Linear, count: int) -> Tensor:  # (count, d_model, d_head): x @ W for each head
        return (scale[:, None] * linear.weight.detach().double().T).unflatten(1, (count, d)).transpose(0, 1)

    w_q = per_head(attention.W_query, heads)
    w_k = per_head(attention.W_key, attention.kv_heads).repeat_interleave(group, dim=0)
    w_v = per_head(attention.W_value, attention.kv_heads).repeat_interleave(group, dim=0)
    w_o = attention.out_proj.weight.detach().double().T.unflatten(0, (heads, d))  # (heads, d_head, d_model)
    return w_q, w_k, w_v, w_o


def layer_circuits(attention: MultiHeadAttention, scale: Tensor) -> tuple[list[Tensor], list[Tensor]]:
    """One layer's per-head W_QK and W_OV, the reading LayerNorm's scale folded in."""
    w_q, w_k, w_v, w_o = layer_factors(attention, scale)
    return list(w_q @ w_k.transpose(1, 2)), list(w_v @ w_o)


def layers_with_head_circuits(model: nn.Module) -> list[bool]:
    """For each of ``model``'s blocks, whether its heads have per-head W_Q/W_K/W_V/W_O of the multihead shape."""
    return [isinstance(block.attention, MultiHeadAttention) for block in model.blocks]


def circuit_layers(model: nn.Module) -> list[int]:
    """The layers :func:`head_circuits` measures (see the module's docstring): none in an encoder-decoder."""
    if getattr(model, "encoder_decoder", False):
        return []
    return [layer for layer, has in enumerate(layers_with_head_circuits(model)) if has]


def has_head_circuits(model: nn.Module) -> bool:
    """Whether every one of ``model``'s layers is measured (:func:`circuit_layers`); computes nothing."""
    return bool(model.blocks) and len(circuit_layers(model)) == len(model.blocks)


SHAPE = "per-head W_Q/W_K/W_V/W_O of the multihead shape"


def by_variant(layers: list[int], variants: list[str]) -> str:
    """``layer 0 (gated_deltanet)``, ``layers 0, 2 (mamba2) and layer 1 (conv)``: ``layers`` named with their
    variants."""
    groups: dict[str, list[int]] = {}
    for layer in layers:
        groups.setdefault(variants[layer], []).append(layer)
    return " and ".join(f"{layer_list(numbers)} ({variant})" for variant, numbers in groups.items())


def lacking_layers(model) -> str:
    """``layer 0 (gated_deltanet) has no ...``: the layers without the matrices, named with their variants."""
    variants = model.config.layer_variants()
    lacking = [layer for layer, has in enumerate(layers_with_head_circuits(model)) if not has]
    return f"{by_variant(lacking, variants)} {'has' if len(lacking) == 1 else 'have'} no {SHAPE}"


def unmeasured_reason(model) -> str:
    """Why :func:`head_circuits` measures nothing for ``model`` (a SequenceModel): an encoder-decoder, or no layer
    has the matrices."""
    variants = model.config.layer_variants()
    if all(layers_with_head_circuits(model)):  # every block has them: an encoder-decoder's heads are not scored
        return "an encoder-decoder's heads are not scored"
    if len(set(variants)) == 1:
        return f"the {variants[0]} variant has no {SHAPE}"
    return lacking_layers(model)


def unembedding(model: nn.Module) -> Tensor:
    """W_U (d_model x vocab), the final LayerNorm's scale folded in."""
    d_model = model.token_embedding.weight.shape[1]
    return norm_scale(model.final_norm, d_model)[:, None] * model.lm_head.weight.detach().double().T


def head_circuits(model: nn.Module) -> HeadCircuits | None:
    """The circuits of a :class:`~attention_lab.model.SequenceModel`'s layers that have them
    (:func:`circuit_layers`); None where none has."""
    layers = circuit_layers(model)
    if not layers:
        return None
    d_model = model.token_embedding.weight.shape[1]
    qk, ov = {}, {}
    for layer in layers:
        block = model.blocks[layer]
        qk[layer], ov[layer] = layer_circuits(block.attention, norm_scale(block.norm_attention, d_model))
    return HeadCircuits(qk, ov, model.token_embedding.weight.detach().double(), unembedding(model))


def composition_score(left: Tensor, right: Tensor) -> float:
    """‖left right‖_F / (‖left‖_F ‖right‖_F): 1 for identical rank-1 matrices, 0 when left's rows are orthogonal to
    right's columns; 0 as well where either matrix is zero."""
    denominator = torch.linalg.matrix_norm(left) * torch.linalg.matrix_norm(right)
    if denominator == 0:
        return 0.0
    return float(torch.linalg.matrix_norm(left @ right) / denominator)


def copying_score(embed: Tensor, ov: Tensor, unembed: Tensor) -> float:
    """Σλ / Σ|λ| over the eigenvalues of ``embed @ ov @ unembed``, computed on ``ov @ unembed @ embed``; NaN for
    weights that are not finite (a diverged run: LAPACK's eigensolver is not asked about them)."""
    product = ov @ unembed @ embed
    if not bool(torch.isfinite(product).all()):
        return math.nan
    eigenvalues = torch.linalg.eigvals(product)
    total = eigenvalues.abs().sum()
    if total == 0:
        return 0.0
    return float(eigenvalues.sum().real / total)


def circuit_scores(circuits: HeadCircuits) -> dict[str, float]:
    """Every composition score (each head of an earlier measured layer into each head of a later one, q, k and v)
    and every measured head's copying score, by tag."""
    scores: dict[str, float] = {}
    layers = sorted(circuits.ov)
    for a in layers:
        for b in (later for later in layers if later > a):
            for i, writer in enumerate(circuits.ov[a]):
                for j in range(len(circuits.ov[b])):
                    readers = {"q": circuits.qk[b][j], "k": circuits.qk[b][j].T, "v": circuits.ov[b][j]}
                    for kind in COMPOSITIONS:
                        scores[composition_tag(kind, (a, i), (b, j))] = composition_score(writer, readers[kind])
    for layer in layers:
        for head, ov in enumerate(circuits.ov[layer]):
            scores[copying_tag(layer, head)] = copying_score(circuits.embed, ov, circuits.unembed)
    return scores
