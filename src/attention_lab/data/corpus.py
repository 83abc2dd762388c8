"""Sentences and the vocabulary built from them (as notebook 000: sorted unique words)."""

from __future__ import annotations

import itertools
import logging
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from attention_lab.errors import ConfigError

log = logging.getLogger(__name__)

DEFAULT_CORPUS = Path(__file__).with_name("corpus.txt")
PAD, UNK, BOS = "<pad>", "<unk>", "<bos>"
SPECIAL_TOKENS = (PAD, UNK)  # every vocabulary's; BOS joins them with task.bos=true
PAD_ID, UNK_ID, BOS_ID = 0, 1, 2
MAX_WORDS = 2**16  # task.words: the embedding table has one row per word
MAX_CORPUS_BYTES = 10 * 2**20  # the notebooks' corpus is 1 KB; every sentence becomes task data in memory
_WORD = re.compile(r"\w+(?:'\w+)*")  # drops punctuation: "short," -> "short", as the notebooks do


def tokenize(sentence: str) -> list[str]:
    return _WORD.findall(sentence)


def read_sentences(path: str | Path | None = None) -> list[str]:
    """One sentence per line; blank lines and lines starting with '#' are skipped."""
    path = DEFAULT_CORPUS if path is None else Path(path).expanduser()
    if not path.is_file():
        raise ConfigError(f"task.corpus={path} is invalid: no such file")
    size = path.stat().st_size
    if size > MAX_CORPUS_BYTES:
        raise ConfigError(f"task.corpus={path} is invalid: it holds {size / 2**20:.1f} MiB of text; a corpus may hold "
                          f"at most {MAX_CORPUS_BYTES // 2**20} MiB (one sentence per line)")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(f"task.corpus={path} is invalid: not UTF-8 text ({err.reason} at byte {err.start})") from None
    sentences = [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    if not any(tokenize(s) for s in sentences):
        raise ConfigError(f"task.corpus={path} is invalid: it contains no words")
    return sentences


class Vocabulary:
    """Special tokens first (``<bos>`` third with ``bos=True``), then the corpus's unique words in sorted order."""

    def __init__(self, words: Iterable[str], *, bos: bool = False) -> None:
        self.specials = (*SPECIAL_TOKENS, BOS) if bos else SPECIAL_TOKENS
        self.itos: list[str] = [*self.specials, *sorted(set(words) - {PAD, UNK, BOS})]
        self.stoi: dict[str, int] = {word: i for i, word in enumerate(self.itos)}

    @classmethod
    def from_sentences(cls, sentences: Iterable[str], *, bos: bool = False) -> Vocabulary:
        return cls((word for sentence in sentences for word in tokenize(sentence)), bos=bos)

    @classmethod
    def for_task(cls, sentences: Iterable[str], words: int | None = None, *, bos: bool = False) -> Vocabulary:
        """The corpus's words; with ``words`` = N (task.words), numbered words ``w0``, ``w1``, ... join them until
        there are N. A larger vocabulary makes associative recall hard for mixers with a small state (Zoology)."""
        vocab = cls.from_sentences(sentences, bos=bos)
        if words is None:
            return vocab
        corpus_words = len(vocab.words)
        if isinstance(words, bool) or not isinstance(words, int) or not corpus_words <= words <= MAX_WORDS:
            raise ConfigError(f"task.words={words} is invalid: the vocabulary holds the corpus's {corpus_words} words, so "
                              f"it must be an integer in {corpus_words}..{MAX_WORDS} (or null for the corpus's words)")
        taken = set(vocab.words)
        numbered = (f"w{n}" for n in range(words + corpus_words) if f"w{n}" not in taken)
        return cls([*vocab.words, *itertools.islice(numbered, words - corpus_words)], bos=bos)

    def __len__(self) -> int:
        return len(self.itos)

    @property
    def words(self) -> list[str]:
        """The real words (no special tokens), in vocabulary order."""
        return self.itos[len(self.specials):]

    def encode(self, words: Sequence[str], *, warn: bool = True) -> list[int]:
        unknown = [w for w in words if w not in self.stoi]
        if unknown and warn:
            log.warning("words not in the vocabulary are mapped to %s: %s", UNK, ", ".join(unknown))
        return [self.stoi.get(w, UNK_ID) for w in words]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]
