"""The attention of one sentence through every layer and head of a trained model: plain data
(numpy arrays and words), shared by the PNG grid, the HTML head view and TensorBoard."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class AttentionMaps:
    """Attention of one sentence through every layer and head of a model."""

    text: str
    words: list[str]  # keys: the input words as the model saw them (unknown words -> <unk>)
    query_words: list[str]  # rows: the same words, or output positions for encoder-decoder models
    predictions: list[str]
    weights: list[Any]  # one (H, T_q, T_k) numpy array per layer
    encoder_decoder: bool = False
    description: str = ""  # the run: directory and main settings
    unknown: list[str] = field(default_factory=list)  # words of the text not in the vocabulary
    mixers: list[str] = field(default_factory=list)  # a hybrid stack's variant of each layer; [] = one variant

    def layer_label(self, layer: int) -> str:
        """``layer 2``, or with a hybrid stack ``layer 2 (mamba2)``: which variant drew the map."""
        return f"layer {layer} ({self.mixers[layer]})" if self.mixers else f"layer {layer}"

    @property
    def layers(self) -> int:
        return len(self.weights)

    @property
    def heads(self) -> int:
        return int(self.weights[0].shape[0]) if self.weights else 0

    @property
    def query_axis(self) -> str:
        return "output position" if self.encoder_decoder else "query"
