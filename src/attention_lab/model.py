"""Token + positional embeddings -> blocks of the chosen attention variant(s) -> vocabulary head.

Everything the model needs comes from one :class:`~attention_lab.config.ModelConfig`. With an encoder-decoder
variant (``cross``), self-attention blocks encode the input and one learned query per output position attends
to that encoding through the variant's blocks (notebook 001's pattern). ``mixers`` chooses one variant per layer
(a hybrid stack, e.g. three gated_deltanet blocks and one multihead).

:class:`TrainedModel` is a SequenceModel with its vocabulary, fed as training feeds it: what AttentionLitModule
trains (it is one), and what the review tools and the attention tab load from a checkpoint with torch alone.
Importing Lightning (torchmetrics, and through it SciPy) is most of a process's start-up; reading a trained model
needs none of it. A checkpoint holds the model config and the vocabulary as plain data (the lit module's hparams) and
the weights under ``model.``: :meth:`TrainedModel.from_checkpoint` rebuilds the model from those alone, as
Lightning's docs describe loading a checkpoint's weights into a plain ``nn.Module``.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from attention_lab.attention import ATTENTION_REGISTRY, build_attention
from attention_lab.attention.hooks import capture
from attention_lab.config import BlockConfig, Mask, ModelConfig, Position
from attention_lab.data.corpus import PAD_ID, UNK_ID


def sinusoidal_table(length: int, d_model: int) -> Tensor:
    """Vaswani et al. (2017): PE[t, 2i] = sin(t / 10000^(2i/d)), PE[t, 2i+1] = cos(t / 10000^(2i/d))."""
    position = torch.arange(length, dtype=torch.float32)[:, None]  # (T, 1)
    frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(10000.0) / d_model))
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(position * frequency)
    table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])
    return table


def layer_options(config: ModelConfig, variant: str, layer: int) -> dict:
    """The options one layer's variant is built with. The variant's own options (its yaml's `options:`) go to its
    blocks only: not to cross's self-attention encoder, nor to a hybrid stack's layers of other variants."""
    options = dict(config.options) if variant == config.name else {}
    if "layer" in ATTENTION_REGISTRY[variant].options:
        options.setdefault("layer", layer)
    return options


def layer_kv_heads(config: ModelConfig, variant: str) -> int | None:
    """kv_heads, like the options, is the config's variant's alone."""
    return config.kv_heads if variant == config.name else None


def block_attention(config: ModelConfig, variant: str, num_heads: int, layer: int = 1) -> nn.Module:
    """One block's attention: ``variant`` is the config's own, a layer's of a hybrid stack (``mixers``), or ``self``
    for cross's encoder; ``layer`` its 1-based depth, handed to a variant that declares a ``layer`` option (one that
    depends on its depth)."""
    options = layer_options(config, variant, layer)
    position = Position(config.position)  # the attention acts on rope and alibi; the rest act on embeddings
    return build_attention(
        variant, d_in=config.d_model, d_out=ATTENTION_REGISTRY[variant].d_out_for(config.d_model, num_heads),
        num_heads=num_heads, kv_heads=layer_kv_heads(config, variant),
        qkv_bias=config.qkv_bias, dropout=config.dropout, causal=Mask(config.mask) is Mask.causal,
        window=config.window, position=position.value, smeared_keys=config.smeared_keys, **options,
    )


class Block(nn.Module):
    """Pre-norm transformer block; residual, LayerNorm and MLP can each be switched off
    (``block=attention_only`` keeps the bare mechanism: x = attention(x))."""

    def __init__(self, attention: nn.Module, d_model: int, block: BlockConfig, dropout: float = 0.0) -> None:
        super().__init__()
        self.attention = attention
        self.residual = block.residual
        self.norm_attention = nn.LayerNorm(d_model) if block.layer_norm else nn.Identity()
        self.norm_mlp = nn.LayerNorm(d_model) if block.layer_norm and block.mlp else nn.Identity()
        hidden = block.mlp_ratio * d_model
        self.mlp = nn.Sequential(
            nn.Linear(d_model, hidden), nn.GELU(), nn.Linear(hidden, d_model), nn.Dropout(dropout),
        ) if block.mlp else None

    def forward(self, x: Tensor, source: Tensor | None = None, *, key_padding_mask: Tensor | None = None) -> Tensor:
        context = self.attention(self.norm_attention(x), source, key_padding_mask=key_padding_mask).context
        x = x + context if self.residual else context
        if self.mlp is not None:
            out = self.mlp(self.norm_mlp(x))
            x = x + out if self.residual else out
        return x


class SequenceModel(nn.Module):
    """Maps (B, T) token ids to (B, T, vocab) logits, one prediction per position."""

    def __init__(self, config: ModelConfig, vocab_size: int) -> None:
        super().__init__()
        self.config = config
        self.encoder_decoder = config.encoder_decoder
        d_model = config.d_model
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        position = Position(config.position)
        self.position_embedding = nn.Embedding(config.context_length, d_model) if position is Position.learned else None
        if position is Position.sinusoidal:  # fixed: a buffer, not a parameter
            self.register_buffer("position_table", sinusoidal_table(config.context_length, d_model), persistent=False)
        else:
            self.position_table = None
        self.dropout = nn.Dropout(config.dropout)
        if self.encoder_decoder:
            self.encoder = nn.ModuleList(self.block("self", 1, layer) for layer in range(1, config.layers + 1))
            self.output_queries = nn.Embedding(config.context_length, d_model)  # one learned query per output slot
        self.blocks = nn.ModuleList(self.block(variant, config.layer_heads(variant), layer)
                                    for layer, variant in enumerate(config.layer_variants(), start=1))
        self.final_norm = nn.LayerNorm(d_model) if config.block.layer_norm else nn.Identity()
        self.lm_head = nn.Linear(d_model, vocab_size)

    def block(self, variant: str, num_heads: int, layer: int) -> Block:
        return Block(block_attention(self.config, variant, num_heads, layer), self.config.d_model, self.config.block,
                     self.config.dropout)

    def kv_cache_per_token(self) -> int | None:
        """The numbers a decoder caches per token over all its layers (keys and values); None if a layer caches
        none (a recurrence)."""
        sizes = [block.attention.kv_cache_per_token() for block in self.blocks]
        return None if None in sizes else sum(sizes)

    def forward(self, tokens: Tensor, *, key_padding_mask: Tensor | None = None) -> Tensor:
        """tokens: (B, T) -> logits (B, T, vocab). What the attention computes inside (scores, weights, each
        head's output) is read or changed through hook points: :func:`attention_lab.attention.hooks.capture`."""
        x = self.token_embedding(tokens)  # (B, T, d_model)
        if self.position_embedding is not None:
            x = x + self.position_embedding.weight[: tokens.shape[1]]  # (T, d_model), broadcast over B
        elif self.position_table is not None:
            x = x + self.position_table[: tokens.shape[1]]
        x = self.dropout(x)
        source = None
        if self.encoder_decoder:
            for layer in self.encoder:
                x = layer(x, key_padding_mask=key_padding_mask)
            source = x
            x = self.output_queries.weight[: tokens.shape[1]].expand_as(source)  # (B, T, d_model)
        for layer in self.blocks:
            x = layer(x, source, key_padding_mask=key_padding_mask)
        return self.lm_head(self.final_norm(x))

    def state_size(self) -> int:
        """The recurrent state one layer keeps at the model's context length, in numbers (each variant's
        :meth:`AttentionModule.state_size`): the largest over the layers, which a hybrid stack may mix."""
        layers = [*(("self", block) for block in self.encoder)] if self.encoder_decoder else []
        layers += zip(self.config.layer_variants(), self.blocks, strict=True)
        return max(self.layer_state_size(variant, block, layer)
                   for layer, (variant, block) in enumerate(layers, start=1))

    def layer_state_size(self, variant: str, block: Block, layer: int) -> int:
        """The state that ``block`` (of ``variant``, at 1-based depth ``layer``) keeps at the model's context length,
        in numbers (:meth:`AttentionModule.state_size`)."""
        return ATTENTION_REGISTRY[variant].state_size(
            self.config.d_model, block.attention.num_heads, self.config.context_length,
            kv_heads=layer_kv_heads(self.config, variant), **layer_options(self.config, variant, layer))


WEIGHTS_PREFIX = "model."  # the SequenceModel's attribute in the module whose state_dict a checkpoint holds


class WeightsMismatch(ValueError):
    """A checkpoint's weights are not those of the model its config describes (one line, naming the first)."""


def check_weights(weights: dict[str, Tensor], expected: dict[str, Tensor]) -> None:
    """Raises WeightsMismatch unless ``weights`` holds each of ``expected``'s names, at its shape, and no other."""
    def shape(tensor: Tensor) -> str:
        return "x".join(map(str, tensor.shape))

    for name, tensor in expected.items():
        if name not in weights:
            raise WeightsMismatch(f"its weights do not fit its model config: {name} is missing")
        if weights[name].shape != tensor.shape:
            raise WeightsMismatch(f"its weights do not fit its model config: {name} is {shape(weights[name])}, "
                                  f"the model's is {shape(tensor)}")
    extra = sorted(set(weights) - set(expected))
    if extra:
        raise WeightsMismatch(f"its weights do not fit its model config: {extra[0]} is not the model's")


class TrainedModel(nn.Module):
    """``model``: the SequenceModel of ``config``; ``vocab``: its words, index = token id."""

    def __init__(self, model: ModelConfig | dict, vocab: list[str]) -> None:
        super().__init__()
        self.config = model if isinstance(model, ModelConfig) else ModelConfig.from_dict(model)
        self.vocab = list(vocab)
        self.model = SequenceModel(self.config, len(self.vocab))
        self.padding_mask = Mask(self.config.mask) is Mask.padding

    @classmethod
    def from_checkpoint(cls, checkpoint: dict[str, Any]) -> TrainedModel:
        """The model of a checkpoint written by scripts/train.py (already loaded, ``weights_only=True``), in eval
        mode. Raises WeightsMismatch when its weights are not those of its model config."""
        hparams = checkpoint["hyper_parameters"]
        weights = {name.removeprefix(WEIGHTS_PREFIX): tensor for name, tensor in checkpoint["state_dict"].items()
                   if name.startswith(WEIGHTS_PREFIX)}
        trained = cls(hparams["model"], hparams["vocab"])
        try:
            check_weights(weights, trained.model.state_dict())
        except WeightsMismatch as mismatch:
            # A run saved before its variant gained an option: read with the value it was built with, else the
            # mismatch as it was.
            trained = cls.saved_before(hparams, weights, mismatch)
        trained.model.load_state_dict(weights)
        return trained.eval()

    @classmethod
    def saved_before(cls, hparams: dict[str, Any], weights: dict[str, Tensor],
                     mismatch: WeightsMismatch) -> TrainedModel:
        """The model of ``hparams`` with the options its config lacks at the values its variant had before gaining
        them (``options_before``), where its weights fit that model; raises ``mismatch`` otherwise."""
        model = dict(hparams["model"])
        variant = ATTENTION_REGISTRY.get(str(model.get("name")))
        options = dict(model.get("options") or {})
        before = {} if variant is None else variant.options_before(int(model.get("num_heads") or 1))
        missing = {key: value for key, value in before.items() if key not in options}
        if not missing:
            raise mismatch
        older = cls({**model, "options": {**options, **missing}}, hparams["vocab"])
        try:
            check_weights(weights, older.model.state_dict())
        except WeightsMismatch:
            raise mismatch from None
        return older

    def forward(self, tokens: Tensor) -> Tensor:
        padding = tokens == PAD_ID if self.padding_mask else None
        return self.model(tokens, key_padding_mask=padding)

    @torch.no_grad()
    def predict_words(self, words_batch: list[list[str]]) -> tuple[list[list[str]], list[Tensor]]:
        """Predicted words and attention weights for whole sentences (eval mode, weights path)."""
        was_training = self.training
        self.eval()
        device = next(self.model.parameters()).device
        length = max(len(w) for w in words_batch)
        stoi = {w: i for i, w in enumerate(self.vocab)}
        tokens = torch.full((len(words_batch), length), PAD_ID, dtype=torch.long, device=device)
        for row, words in enumerate(words_batch):
            tokens[row, : len(words)] = torch.tensor([stoi.get(w, UNK_ID) for w in words], device=device)
        with capture(self.model, points=("weights",)) as cache:
            logits = self(tokens)
        weights = cache.layers("weights")
        self.train(was_training)
        preds = [[self.vocab[i] for i in row[: len(words)]] for row, words in zip(logits.argmax(-1).tolist(), words_batch, strict=True)]
        return preds, weights
