"""The attention of one sentence through every layer and head of a trained model: plain data
(numpy arrays and words), shared by the PNG grid, the HTML head view and TensorBoard."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from attention_lab.plotting.colour_scale import ColourScale, colour_scale


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
    kinds: list[str] = field(default_factory=list)  # each layer's attention kind (AttentionModule.kind)
    mixers: list[str] = field(default_factory=list)  # a hybrid stack's variant of each layer; [] = one variant

    def colour_scale(self) -> ColourScale:
        """0–1 for weights in [0, 1]; a scale symmetric around 0 for signed or unbounded maps (diff, recurrences)."""
        return colour_scale(self.kinds, max((float(abs(w).max()) for w in self.weights if w.size), default=0.0))

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
