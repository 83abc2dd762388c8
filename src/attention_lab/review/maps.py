"""A trained run's attention maps: the attention of a sentence through every layer and head of a model loaded
by :mod:`attention_lab.records.trained_run` (which finds the run's files and loads its checkpoint as data)."""

from __future__ import annotations

import logging

from attention_lab.errors import ReviewError
from attention_lab.review.attention_maps import AttentionMaps

log = logging.getLogger(__name__)


# ---------------------------------------------------------------------------------------------- words -> maps

def prepare_words(text: str, vocab: list[str], context_length: int) -> tuple[list[str], list[str]]:
    """Tokenize like the training data; words outside the vocabulary become <unk> (with a warning,
    and a hint when only the case differs); text longer than the positional table is cut."""
    from attention_lab.data.corpus import UNK, tokenize

    words = tokenize(text)
    if not words:
        raise ReviewError(f"text={text!r} contains no words")
    if len(words) > context_length:
        log.warning("text has %d words; only the first %d (model.context_length) are used", len(words), context_length)
        words = words[:context_length]
    known = set(vocab)
    unknown = [w for w in words if w not in known]
    if unknown:
        by_lower = {w.lower(): w for w in vocab}
        hints = [f"{w} (did you mean {by_lower[w.lower()]}?)" if w.lower() in by_lower else w for w in unknown]
        log.warning("words not in the vocabulary are mapped to %s: %s", UNK, ", ".join(hints))
    return [w if w in known else UNK for w in words], unknown


def compute_maps(module, text: str, *, description: str = "") -> AttentionMaps:
    """Run ``text`` through ``module`` (a TrainedModel, or the AttentionLitModule that is one) and collect every
    layer's weights."""
    words, unknown = prepare_words(text, module.vocab, module.config.context_length)
    predictions, weights = module.predict_words([words])
    predictions = predictions[0]
    encoder_decoder = bool(module.model.encoder_decoder)
    # Encoder-decoder: rows are output positions (learned queries), labelled with what they predict.
    query_words = [f"out{i}→{p}" for i, p in enumerate(predictions)] if encoder_decoder else list(words)
    arrays = [w[0].detach().float().cpu().numpy() for w in weights]
    return AttentionMaps(text=text, words=words, query_words=query_words, predictions=predictions, weights=arrays,
                         encoder_decoder=encoder_decoder, description=description, unknown=unknown,
                         kinds=[block.attention.kind for block in module.model.blocks],
                         mixers=list(module.config.mixers or ()))
