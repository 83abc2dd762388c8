"""Token + positional embeddings -> blocks of the chosen attention variant -> vocabulary head.

For ``cross`` the model is an encoder-decoder (notebook 001's pattern): ``self``-attention blocks
encode the input, and one learned query per output position attends to that encoding through
``cross``-attention blocks.
"""

from __future__ import annotations

from torch import Tensor, nn

from attention_lab.attention import AttentionModule, build_attention


def attention_width(variant: str, d_model: int, num_heads: int) -> int:
    """d_out to ask for so that every variant's output is d_model wide."""
    return d_model // num_heads if variant == "multihead_concat" else d_model


class Block(nn.Module):
    """Pre-norm transformer block; residual, LayerNorm and MLP can each be switched off
    (``block=attention_only`` keeps the bare mechanism: context = attention(x))."""

    def __init__(self, attention: AttentionModule, d_model: int, *, residual: bool = True,
                 layer_norm: bool = True, mlp: bool = True, mlp_ratio: int = 4, dropout: float = 0.0) -> None:
        super().__init__()
        self.attention = attention
        self.residual = residual
        self.norm_attention = nn.LayerNorm(d_model) if layer_norm else nn.Identity()
        self.norm_mlp = nn.LayerNorm(d_model) if layer_norm and mlp else nn.Identity()
        self.mlp = nn.Sequential(
            nn.Linear(d_model, mlp_ratio * d_model),
            nn.GELU(),
            nn.Linear(mlp_ratio * d_model, d_model),
            nn.Dropout(dropout),
        ) if mlp else None

    def forward(self, x: Tensor, source: Tensor | None = None, *, key_padding_mask: Tensor | None = None,
                need_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        context, weights = self.attention(self.norm_attention(x), source,
                                          key_padding_mask=key_padding_mask, need_weights=need_weights)
        x = x + context if self.residual else context
        if self.mlp is not None:
            out = self.mlp(self.norm_mlp(x))
            x = x + out if self.residual else out
        return x, weights


class SequenceModel(nn.Module):
    """Maps (B, T) token ids to (B, T, vocab) logits, one prediction per position."""

    def __init__(self, vocab_size: int, *, attention: str, d_model: int, num_heads: int, layers: int,
                 context_length: int, causal: bool = False, dropout: float = 0.0, qkv_bias: bool = False,
                 normalize: str = "softmax", residual: bool = True, layer_norm: bool = True,
                 mlp: bool = True, mlp_ratio: int = 4) -> None:
        super().__init__()
        self.encoder_decoder = attention == "cross"
        self.token_embedding = nn.Embedding(vocab_size, d_model)
        self.position_embedding = nn.Embedding(context_length, d_model)
        self.dropout = nn.Dropout(dropout)

        def block(variant: str, heads: int) -> Block:
            options = {"normalize": normalize} if variant == "simple" else {}
            attn = build_attention(variant, d_in=d_model, d_out=attention_width(variant, d_model, heads),
                                   num_heads=heads, qkv_bias=qkv_bias, dropout=dropout,
                                   causal=causal and variant != "cross", **options)
            return Block(attn, d_model, residual=residual, layer_norm=layer_norm, mlp=mlp,
                         mlp_ratio=mlp_ratio, dropout=dropout)

        if self.encoder_decoder:
            self.encoder = nn.ModuleList(block("self", 1) for _ in range(layers))
            self.output_queries = nn.Embedding(context_length, d_model)  # one learned query per output slot
            self.blocks = nn.ModuleList(block("cross", 1) for _ in range(layers))
        else:
            self.blocks = nn.ModuleList(block(attention, num_heads) for _ in range(layers))
        self.final_norm = nn.LayerNorm(d_model) if layer_norm else nn.Identity()
        self.lm_head = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: Tensor, *, key_padding_mask: Tensor | None = None,
                need_weights: bool = False) -> tuple[Tensor, list[Tensor]]:
        """tokens: (B, T). Returns logits (B, T, vocab) and, when need_weights, one (B, H, T, T)
        weight tensor per block (the decoder's cross-attention blocks for ``cross``)."""
        positions = self.position_embedding.weight[: tokens.shape[1]]  # (T, d_model)
        x = self.dropout(self.token_embedding(tokens) + positions)  # (B, T, d_model)
        source = None
        if self.encoder_decoder:
            for layer in self.encoder:
                x, _ = layer(x, key_padding_mask=key_padding_mask)
            source = x
            x = self.output_queries.weight[: tokens.shape[1]].expand_as(source)  # (B, T, d_model)
        weights = []
        for layer in self.blocks:
            x, w = layer(x, source, key_padding_mask=key_padding_mask, need_weights=need_weights)
            weights.append(w)
        logits = self.lm_head(self.final_norm(x))
        return logits, weights if need_weights else []
