"""What the tab offers a person to type, read from a run's checkpoint (loaded by the sentence box's
:class:`~attention_lab.tensorboard_plugin.sentence.SentenceModels`: the same bounds, cache and locks):

- the **vocabulary**: the words the model knows, which the sentence box lists (any other word is read as
  ``<unk>``, so a sentence typed without the list mostly shows ``<unk>``);
- an **example pair** for the patching box: the run's probe (the input its task chose to show the mechanism) and
  the same sentence with one word changed, such that the model's prediction after the last word changes, found by
  running the model on the changed sentences. Patching needs exactly that (a pair whose predictions agree has
  nothing to restore), and a pair typed blind rarely has it. Of every change that flips the prediction, the one
  whose new prediction wins by the widest logit margin is offered: the model's clearest case.

torch is imported inside the functions: TensorBoard imports the plugin without it.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from attention_lab.data.corpus import BOS, PAD, UNK
from attention_lab.tensorboard_plugin.checkpoint_circuits import sentence_tokens, supported
from attention_lab.tensorboard_plugin.sentence import SentenceModels, keep

SPECIAL_WORDS = frozenset((PAD, UNK, BOS))  # never listed, never typed: the model's own markers
MAX_LISTED_WORDS = 1000  # words of a vocabulary sent to the page: the lab's tasks know a few dozen
MAX_TRIED_TOKENS = 1 << 15  # tokens run in the search for an example pair (the sentences tried x their length)
MAX_TRIED = 512  # changed sentences tried at most, whatever their length
BATCH = 64  # changed sentences run at once
KEPT_EXAMPLES = 16  # example pairs kept (a few runs, each with its probe)


def listed_words(vocab: list[str]) -> list[str]:
    """The words of ``vocab`` a person can type, in the vocabulary's order (sorted, as the lab builds it)."""
    return [word for word in vocab if word not in SPECIAL_WORDS]


def changes_to_try(ids: list[int], vocab_size: int, special: set[int]) -> list[tuple[int, int]]:
    """(position, word id) changes of the sentence ``ids`` to try, at most MAX_TRIED and MAX_TRIED_TOKENS tokens
    in all: at each position the same words of the vocabulary, the first that are neither special nor already in
    the sentence (a changed word that appears elsewhere would read as a repeat), as many as the bounds leave for
    every position; a sentence longer than the changes allowed has positions spread evenly over it."""
    tried = max(1, min(MAX_TRIED, MAX_TRIED_TOKENS // len(ids)))
    positions = range(0, len(ids), -(-len(ids) // tried))
    present = set(ids)
    words = [word for word in range(vocab_size) if word not in special and word not in present]
    per_position = words[:max(1, tried // len(positions))]
    return [(position, word) for position in positions for word in per_position][:tried]


def example_pair(module, text: str) -> dict:
    """The example pair for ``text`` (the run's probe; special tokens in it are dropped): see the module's
    docstring. ``pair`` is None, with ``reason``, when no one-word change flips the prediction."""
    import torch

    supported(module)  # a model patching cannot run on gets that model's one line instead of an example
    words, _, tokens = sentence_tokens(module, " ".join(w for w in text.split() if w not in SPECIAL_WORDS))
    vocab = list(module.vocab)
    special = {index for index, word in enumerate(vocab) if word in SPECIAL_WORDS}
    changes = changes_to_try(tokens[0].tolist(), len(vocab), special)
    with torch.no_grad():
        right = int(module(tokens)[0, -1].argmax())
        best = None  # (margin, index of the change, the prediction it makes)
        for start in range(0, len(changes), BATCH):
            chunk = changes[start:start + BATCH]
            batch = tokens.repeat(len(chunk), 1)
            for row, (position, word) in enumerate(chunk):
                batch[row, position] = word
            last = module(batch)[:, -1].double()  # (chunk, vocab)
            predicted = last.argmax(-1)
            margins = last.gather(-1, predicted[:, None])[:, 0] - last[:, right]
            for row in range(len(chunk)):
                if int(predicted[row]) != right and (best is None or float(margins[row]) > best[0]):
                    best = (float(margins[row]), start + row, int(predicted[row]))
    clean = " ".join(words)
    if best is None:
        return {"pair": None, "tried": len(changes),
                "reason": f"no one-word change of “{clean}” changes what the model predicts after its last word "
                          f"(“{vocab[right]}”; {len(changes)} changes tried): type a pair of your own"}
    _, index, other = best
    position, word = changes[index]
    corrupted = [vocab[word] if t == position else w for t, w in enumerate(words)]
    return {"pair": {"clean": clean, "corrupted": " ".join(corrupted), "position": position,
                     "clean_prediction": vocab[right], "corrupted_prediction": vocab[other]},
            "tried": len(changes), "reason": None}


class CheckpointExamples:
    """The vocabulary and the example pair of the runs under the sentence box's logdir, each computed under the
    loaded checkpoint's lock (one request at a time per checkpoint); example pairs are kept (bounded), keyed by the
    checkpoint (its path, size and modification time) and the probe."""

    def __init__(self, sentences: SentenceModels) -> None:
        self.sentences = sentences
        self.examples: OrderedDict[tuple, dict] = OrderedDict()
        self.lock = threading.Lock()  # guards ``examples``

    def vocabulary(self, run: str) -> dict:
        loaded = self.sentences.module_for(run)
        words = listed_words(list(loaded.module.vocab))
        return {"run": run, "checkpoint": loaded.files.checkpoint.name, "step": loaded.step,
                "words": words[:MAX_LISTED_WORDS], "size": len(words)}

    def example_pair(self, run: str, text: str) -> dict:
        _, checkpoint = self.sentences.files_of(run)
        key = (*checkpoint, text)
        with self.lock:
            if key in self.examples:
                self.examples.move_to_end(key)
                return self.examples[key]
        loaded = self.sentences.module_for(run)
        with loaded.lock:
            answer = {"run": run, "checkpoint": loaded.files.checkpoint.name, "step": loaded.step,
                      **example_pair(loaded.module, text)}
        with self.lock:
            keep(self.examples, key, answer, KEPT_EXAMPLES)
        return answer

