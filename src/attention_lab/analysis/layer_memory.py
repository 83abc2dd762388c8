"""What a model keeps to produce the next token, said in the console's ``KV cache per token:`` line, layer by layer.

A layer of softmax attention caches a key and a value per token (its KV cache); a recurrence (``gated_deltanet``,
``mamba2``, ...) or a long convolution keeps a state instead, of a size its variant declares
(:meth:`attention_lab.attention.base.AttentionModule.state_size`). A hybrid stack (``mixers=[...]``) mixes both: the
line names each layer and its variant, so that neither half reads as the whole model's ("none" where one layer
caches keys, or a cache where another keeps a state). Layers are counted from 0, as in the tags and the maps'
titles (``layer 1 (multihead)``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

__all__ = ["memory_line"]

if TYPE_CHECKING:  # the type only: the line is written for a model train() has built
    from attention_lab.model import SequenceModel


def layer_list(layers: list[int]) -> str:
    """``layer 1``, ``layers 0, 2``."""
    return f"layer {layers[0]}" if len(layers) == 1 else "layers " + ", ".join(map(str, layers))


def grouped(rows: list[tuple[int, str, int]]) -> list[tuple[list[int], str, int]]:
    """(layers, variant, numbers) for each (variant, numbers) of ``rows`` (layer, variant, numbers), in the order of
    their first layer: a deep stack of one variant is one entry, not one per layer."""
    groups: dict[tuple[str, int], list[int]] = {}
    for layer, variant, numbers in rows:
        groups.setdefault((variant, numbers), []).append(layer)
    return [(layers, variant, numbers) for (variant, numbers), layers in groups.items()]


def memory_line(model: SequenceModel) -> str:
    """The text after ``KV cache per token:`` for ``model``'s decoder layers (``model.blocks``)."""
    variants = model.config.layer_variants()
    caches = [block.attention.kv_cache_per_token() for block in model.blocks]
    if None not in caches:
        return f"{sum(caches)} numbers over {len(caches)} layers"
    states = [(layer, variant, model.layer_state_size(variant, block, layer + 1))
              for layer, (variant, block, cache) in enumerate(zip(variants, model.blocks, caches, strict=True))
              if cache is None]
    kept = "; ".join(
        f"{layer_list(layers)} ({variant}) {'keeps' if len(layers) == 1 else 'keep'} a state of {numbers} numbers"
        f"{'' if len(layers) == 1 else ' each'}" for layers, variant, numbers in grouped(states))
    cached = [(layer, variant, cache) for layer, (variant, cache) in enumerate(zip(variants, caches, strict=True))
              if cache is not None]
    if not cached:
        return f"none: {kept} instead"
    where = "; ".join(f"{layer_list(layers)} ({variant})" for layers, variant, _ in grouped(cached))
    return f"{sum(cache for _, _, cache in cached)} numbers, in {where}; {kept} instead"
