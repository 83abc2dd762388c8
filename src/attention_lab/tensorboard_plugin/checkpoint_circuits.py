"""A run's checkpoint explained for the tab, through the checkpoints the sentence box loads
(:class:`~attention_lab.tensorboard_plugin.sentence.SentenceModels`: the same bounds, cache and locks):

- a head's **word tables**: the QK circuit ``W_E W_QK W_Eᵀ`` (query word x key word: which key words each query
  word looks for) and the OV circuit ``W_E W_OV W_U`` (attended word x output word: what reading a word makes the
  head vote for), top ``k`` words per row. Elhage et al. (2021)'s direct path: token embeddings only (no
  positions), the reading LayerNorm's scale folded in and its centring and normalisation left out, as
  :mod:`attention_lab.analysis.circuits` folds them;
- **direct logit attribution** of a sentence: each head's output through ``out_proj``, the final LayerNorm
  linearised with the sentence's own scale (``(c - mean(c)) / σ(x) · γ``, σ of the residual stream the clean run
  ends with) and the unembedding, at the word the model predicts at each position. The heads' shares and the
  ``rest`` (embeddings, biases, MLPs, the LayerNorm's shift) sum to the predicted word's logit;
- **patching of a typed pair**: a clean and a corrupted sentence of one length, the logit difference between
  the clean run's prediction after the last word and the corrupted run's, restored by each head's (and each
  whole layer's) clean output (:func:`attention_lab.analysis.patching.patch_batches`).

torch is imported inside the functions: TensorBoard imports the plugin without it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from attention_lab.analysis.tags import HeadMetric
from attention_lab.tensorboard_plugin.limits import DECIMALS, MAX_HEADS, MAX_LAYERS
from attention_lab.tensorboard_plugin.sentence import MAX_CHARS, SentenceError, SentenceModels, keep

TOP_K = 5  # words shown per row of a word table
MAX_TOP_K = 20
MAX_ROWS = 2048  # rows of a word table sent to the page: the vocabularies of the lab's tasks are far smaller
# numbers of a word table's product formed at once (8 MB in float64): its columns are the vocabulary's words, bounded
# by attention_lab.records.model_bounds.MAX_VOCAB, so a block has at least WORD_TABLE_BLOCK // MAX_VOCAB = 8 rows
WORD_TABLE_BLOCK = 1 << 20
KEPT_TABLES = 64  # word tables kept (a few heads of a few runs)


def rounded(value: float) -> float | None:
    import math

    return round(value, DECIMALS) if math.isfinite(value) else None


def top_words(rows, right, vocab: list[str], k: int) -> list[dict]:
    """Each row of ``rows @ right`` (rows x vocab) as its word and its top ``k`` columns: ``{"word", "top": [[word,
    value], ...]}``. The product is formed a block of rows at a time (about WORD_TABLE_BLOCK numbers), so what a
    word table holds at once does not grow with the rows shown; a single block where the whole product is that
    small, as for the lab's vocabularies."""
    import torch

    block = max(1, WORD_TABLE_BLOCK // max(right.shape[1], 1))
    tops = [torch.topk(rows[start:start + block] @ right, min(k, right.shape[1]), dim=-1)
            for start in range(0, rows.shape[0], block)]
    values, columns = torch.cat([top.values for top in tops]), torch.cat([top.indices for top in tops])
    return [{"word": vocab[row], "top": [[vocab[c], rounded(v)] for c, v in zip(cols, vals, strict=True)]}
            for row, (cols, vals) in enumerate(zip(columns.tolist(), values.tolist(), strict=True))]


def supported(module) -> None:
    """Raises SentenceError (422) where the model's heads have no per-head circuits (:func:`has_head_circuits`) or
    where a block has no residual stream (its heads' outputs do not reach the logits directly)."""
    from attention_lab.analysis.circuits import circuit_layers, has_head_circuits, lacking_layers, unmeasured_reason

    model = module.model
    if not has_head_circuits(model):
        # The tab's views are of every layer: a hybrid stack's measured layers are in its scalars only.
        why = lacking_layers(model) if circuit_layers(model) else unmeasured_reason(model)
        raise SentenceError(f"{why}: no circuits to show", status=422)
    if not all(block.residual for block in model.blocks):
        raise SentenceError("this run's blocks have no residual stream (block.residual=false): the heads' outputs "
                            "do not add up to the logits", status=422)
    layers, heads = len(model.blocks), max(block.attention.num_heads for block in model.blocks)
    if layers > MAX_LAYERS or heads > MAX_HEADS:
        raise SentenceError(f"this run's model has {layers} layers x {heads} heads; the attention tab shows at most "
                            f"{MAX_LAYERS} x {MAX_HEADS}", status=422)


def word_tables(module, layer: int, head: int, k: int) -> dict:
    """The QK and OV word tables of one head (see the module's docstring), for the first MAX_ROWS words: that
    head's W_QK and W_OV alone (d_model x d_model each), then the rows shown, a block at a time (:func:`top_words`)."""
    from attention_lab.analysis.circuits import layer_factors, norm_scale, unembedding

    blocks = module.model.blocks
    if not (0 <= layer < len(blocks) and 0 <= head < blocks[layer].attention.num_heads):
        raise SentenceError(f"layer={layer}, head={head}: this run's model has {len(blocks)} layers of "
                            f"{blocks[0].attention.num_heads} heads")
    embed = module.model.token_embedding.weight.detach().double()  # (vocab, d_model)
    scale = norm_scale(blocks[layer].norm_attention, embed.shape[1])
    w_q, w_k, w_v, w_o = layer_factors(blocks[layer].attention, scale)  # (heads, d_model, d_head); W_O transposed
    vocab = list(module.vocab)
    shown = embed[:MAX_ROWS]
    qk = top_words(shown @ (w_q[head] @ w_k[head].T), embed.T, vocab, k)  # query word x key word
    ov = top_words(shown @ (w_v[head] @ w_o[head]), unembedding(module.model), vocab, k)  # attended x output word
    return {"layer": layer, "head": head, "k": k, "rows": min(len(vocab), MAX_ROWS), "vocab_size": len(vocab),
            "qk": qk, "ov": ov}


def sentence_tokens(module, text: str):
    """(words as the model reads them, words unknown to it, (1, T) token ids)."""
    import torch

    from attention_lab.data.corpus import UNK_ID
    from attention_lab.errors import ReviewError
    from attention_lab.review.maps import prepare_words

    try:
        words, unknown = prepare_words(text[:MAX_CHARS], module.vocab, module.config.context_length)
    except ReviewError as err:
        raise SentenceError(str(err)) from None
    ids = {word: index for index, word in enumerate(module.vocab)}
    return words, unknown, torch.tensor([[ids.get(word, UNK_ID) for word in words]])


def attribution(module, text: str) -> dict:
    """Direct logit attribution of every head at every position of ``text`` (see the module's docstring)."""
    import torch
    from torch import nn

    from attention_lab.analysis.ablation import head_output_name
    from attention_lab.attention.hooks import capture

    model = module.model
    words, unknown, tokens = sentence_tokens(module, text)
    names = [head_output_name(layer) for layer in range(len(model.blocks))]
    final = {}
    # the residual stream the final LayerNorm reads: a forward pre-hook, PyTorch's public way to see a module's input
    handle = model.final_norm.register_forward_pre_hook(lambda _, inputs: final.update(x=inputs[0].detach()))
    try:
        with torch.no_grad(), capture(model, names=names) as cache:
            logits = module(tokens)[0].double()  # (T, vocab)
    finally:
        handle.remove()
    x = final["x"][0].double()  # (T, d_model)
    norm = model.final_norm
    if isinstance(norm, nn.LayerNorm):
        sigma = (x.var(-1, unbiased=False, keepdim=True) + norm.eps).sqrt()  # (T, 1): the clean run's scale
        gamma = norm.weight.detach().double() if norm.weight is not None else torch.ones(x.shape[-1], dtype=torch.float64)
        centre = True
    else:
        sigma, gamma, centre = torch.ones(x.shape[0], 1, dtype=torch.float64), torch.ones(x.shape[-1], dtype=torch.float64), False
    predicted = logits.argmax(-1)  # (T,)
    direction = model.lm_head.weight.detach().double()[predicted] * gamma / sigma  # (T, d_model)
    shares = []  # [layer][head] -> (T,)
    for layer, block in enumerate(model.blocks):
        attention = block.attention
        outputs = cache[names[layer]][0].double()  # (H, T, d_head)
        w_o = attention.out_proj.weight.detach().double().T.unflatten(0, (attention.num_heads, -1))  # (H, d_head, d_model)
        written = outputs @ w_o  # (H, T, d_model): each head's share of out_proj's output
        if centre:
            written = written - written.mean(-1, keepdim=True)
        shares.append((written * direction).sum(-1))  # (H, T)
    logit = logits.gather(-1, predicted[:, None])[:, 0]  # (T,)
    heads_total = sum(layer.sum(0) for layer in shares)  # (T,)
    return {"words": words, "unknown": unknown, "predictions": [module.vocab[i] for i in predicted.tolist()],
            "logit": [rounded(v) for v in logit.tolist()], "rest": [rounded(v) for v in (logit - heads_total).tolist()],
            "heads": [[[rounded(v) for v in share.tolist()] for share in layer] for layer in shares]}  # [l][h][t]


def patch_pair(module, clean: str, corrupted: str) -> dict:
    """Patching of one typed pair: the layers x heads fraction restored (see the module's docstring)."""
    import torch

    from attention_lab.analysis.patching import patch_batches
    from attention_lab.data.corpus import PAD_ID

    clean_words, _, clean_tokens = sentence_tokens(module, clean)
    corrupted_words, _, corrupted_tokens = sentence_tokens(module, corrupted)
    if len(clean_words) != len(corrupted_words):
        raise SentenceError(f"the clean sentence has {len(clean_words)} words and the corrupted one "
                            f"{len(corrupted_words)}: patching puts each head's output back word by word, so they "
                            "need the same number")
    with torch.no_grad():
        clean_logits, corrupted_logits = module(clean_tokens)[0, -1], module(corrupted_tokens)[0, -1]  # (vocab,)
    right, other = int(clean_logits.argmax()), int(corrupted_logits.argmax())
    vocab = module.vocab
    if right == other:
        raise SentenceError(f"both sentences make the model predict {vocab[right]!r} after their last word: nothing "
                            "to restore; change the corrupted sentence so that its prediction changes")
    targets = torch.full_like(clean_tokens, PAD_ID)
    implied = torch.full_like(clean_tokens, PAD_ID)
    targets[0, -1], implied[0, -1] = right, other
    mask = torch.zeros_like(clean_tokens, dtype=torch.bool)
    mask[0, -1] = True
    restored = patch_batches(module, [(clean_tokens, corrupted_tokens, targets, implied, mask)])
    cells = {(record.layer, record.head): value for tag, value in restored.items()
             if (record := HeadMetric.parse(tag)) is not None}
    layers = max(layer for layer, _ in cells) + 1
    heads = max(head for _, head in cells if head is not None) + 1
    return {"clean_words": clean_words, "corrupted_words": corrupted_words,
            "clean_prediction": vocab[right], "corrupted_prediction": vocab[other],
            "clean_diff": rounded(float(clean_logits[right] - clean_logits[other])),
            "corrupted_diff": rounded(float(corrupted_logits[right] - corrupted_logits[other])),
            "cells": [[rounded(cells[layer, h]) if (layer, h) in cells else None for h in range(heads)]
                      for layer in range(layers)],
            "whole_layer": [rounded(cells[layer, None]) if (layer, None) in cells else None for layer in range(layers)]}


class CheckpointCircuits:
    """The three views above for the runs under the sentence box's logdir; word tables are kept (bounded), the
    rest is computed per request under the loaded checkpoint's lock, one request at a time per checkpoint."""

    def __init__(self, sentences: SentenceModels) -> None:
        self.sentences = sentences
        self.tables: OrderedDict[tuple, dict] = OrderedDict()
        self.lock = threading.Lock()  # guards ``tables``

    def run_on(self, run: str, compute) -> dict:
        loaded = self.sentences.module_for(run)
        with loaded.lock:
            supported(loaded.module)
            answer = compute(loaded.module)
        return {"run": run, "checkpoint": loaded.files.checkpoint.name, "step": loaded.step, **answer}

    def word_tables(self, run: str, layer: int, head: int, k: int = TOP_K) -> dict:
        if not 1 <= k <= MAX_TOP_K:
            raise SentenceError(f"k={k}: the word tables show 1 to {MAX_TOP_K} words a row")
        _, checkpoint = self.sentences.files_of(run)
        key = (*checkpoint, layer, head, k)
        with self.lock:
            if key in self.tables:
                self.tables.move_to_end(key)
                return self.tables[key]
        answer = self.run_on(run, lambda module: word_tables(module, layer, head, k))
        with self.lock:
            keep(self.tables, key, answer, KEPT_TABLES)
        return answer

    def attribution(self, run: str, text: str) -> dict:
        return self.run_on(run, lambda module: attribution(module, text))

    def patch_pair(self, run: str, clean: str, corrupted: str) -> dict:
        return self.run_on(run, lambda module: patch_pair(module, clean, corrupted))
