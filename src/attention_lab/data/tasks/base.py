"""What a task is: (input ids, target ids) pairs for training and validation, train and val disjoint, and
optionally a second validation set of longer inputs than training ever shows (task.ood_min_len..ood_max_len).

A task's own knobs (recall's pairs, copy's delay) are ``task.options.<name>``, declared once by its class as the
dataclass ``Options``: each field's type, default and meaning. The shared knobs (lengths, sizes, corpus) are
:class:`~attention_lab.config.TaskConfig`'s fields."""

from __future__ import annotations

import contextlib
import dataclasses
import random
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from omegaconf import OmegaConf
from omegaconf.errors import ValidationError

from attention_lab.config import TaskConfig
from attention_lab.data.corpus import PAD_ID, Vocabulary, tokenize
from attention_lab.errors import ConfigError
from attention_lab.lazy_registry import LazyRegistry
from attention_lab.names import did_you_mean

if TYPE_CHECKING:
    from attention_lab.data.tensors import Examples

Pairs = list[tuple[list[int], list[int]]]
# Every task's name, read from the package's sources; a task's module is imported when its class is first used.
TASK_REGISTRY: LazyRegistry[type[Task]] = LazyRegistry(
    "attention_lab.data.tasks", Path(__file__).resolve().parent, "register_task")


def register_task(name: str) -> Callable[[type[Task]], type[Task]]:
    def decorator(cls: type[Task]) -> type[Task]:
        cls.name = name
        TASK_REGISTRY.add(name, cls)
        return cls

    return decorator


@dataclass
class NoOptions:
    """The options of a task that has none of its own."""


def shown(value: Any) -> str:
    """A value as the user writes it on the command line."""
    return "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


def typed_options(task: str, declared: type, values: Mapping[str, Any] | None) -> Any:
    """``values`` (task.options) as the task's ``declared`` dataclass, its defaults for what is not set. A name it
    does not declare, or a value that is not of the field's type, is a ConfigError naming the task."""
    names = [f.name for f in dataclasses.fields(declared)]
    types = {f.name: f.type for f in dataclasses.fields(declared)}
    values = dict(values or {})
    for key, value in values.items():
        setting = f"task.options.{key}={shown(value)} is invalid for task={task}"
        if key not in names:
            known = f"its options: {', '.join(names)}" if names else "it takes no options"
            raise ConfigError(f"{setting}: {task} has no option '{key}'{did_you_mean(str(key), names, 'task.options.')}"
                              f" ({known})")
        try:
            OmegaConf.merge(OmegaConf.structured(declared), {key: value})
        except ValidationError as err:
            raise ConfigError(f"{setting}: it must be of type {getattr(types[key], '__name__', types[key])}") from err
    return OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(declared), values))


def option_hint(key: str) -> str:
    """``"; did you mean task.options.<key> (task=...)?"`` when ``key``, written as a shared setting (``task.pairs``),
    is the own option of some task; else ""."""
    owners = [f"task={name}" for name, cls in sorted(TASK_REGISTRY.items())
              if key in {f.name for f in dataclasses.fields(cls.Options)}]
    return f"; did you mean task.options.{key} ({', '.join(owners)})?" if owners else ""


def option(default: Any, *, help: str) -> Any:
    """A field of a task's ``Options``: its default, and its meaning, which docs/configuration.md's table of the
    tasks' options shows (``make docs`` writes it)."""
    return dataclasses.field(default=default, metadata={"help": help})


class Task:
    name = ""
    # Its own knobs, set as task.options.<name>: a dataclass whose fields give each one's type, default and meaning
    # (declared with `option(...)`).
    Options: ClassVar[type] = NoOptions
    # What docs/configuration.md's table of the tasks says of it (`make docs` writes it from here): the input and the
    # target it trains on, and its inputs' lengths.
    summary: ClassVar[str] = ""
    lengths: ClassVar[str] = ""

    @classmethod
    def options_of(cls, config: TaskConfig | Mapping[str, Any]) -> Any:
        """The run's ``task.options`` as this task's :attr:`Options` (typed, defaults filled in)."""
        values = config.options if isinstance(config, TaskConfig) else config.get("options")
        return typed_options(cls.name, cls.Options, values)

    def head_score_kind(self, config: TaskConfig) -> str | None:
        """The head score (a kind of :data:`attention_lab.analysis.head_scores.HEAD_SCORE_KINDS`) whose pattern solves this
        task, if one does: the head the attention tab and the HTML head view open on. None: no single pattern."""
        return None

    def check(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> None:
        """Raise ConfigError when the corpus cannot give the requested data (cheap: builds nothing)."""

    def pairs(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
              rng: random.Random) -> tuple[Pairs, Pairs]:
        raise NotImplementedError

    def tensors(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
                rng: random.Random) -> tuple[Examples, Examples]:
        """(training, validation) examples as the datamodule holds them: (inputs, targets) int64 tensors of
        task.max_len positions, <pad>-padded. By default :meth:`pairs`, padded; a task that draws its inputs as
        tensors overrides this and skips the lists (mqar: hundreds of thousands of inputs per run)."""
        from attention_lab.data.tensors import padded  # torch: only when data is built, never for the checks

        train, val = self.pairs(vocab, sentences, config, rng)
        return padded(train, config.max_len), padded(val, config.max_len)

    def probe(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> list[str]:
        """The words whose attention the run shows (``probe=null``): an input that shows the task's mechanism,
        made of the vocabulary's words. By default a sentence: the corpus's first, cut to task.max_len words."""
        return first_sentence(sentences)[:config.max_len]

    def example_words(self, words: list[str]) -> list[str]:
        """An example input made of ``words`` (the end-of-run note's sentence for visualize.py): as they are, unless
        the task's mechanism needs inputs of a shape of their own."""
        return list(words)

    def corrupted(self, inputs: list[int], targets: list[int]) -> tuple[list[int], list[int]] | None:
        """Activation patching's natural corruption of one example (as :meth:`pairs` makes it, no <bos>, no padding):
        (an input of the same length that changes what the task's mechanism reads, the targets that input implies,
        PAD_ID where it implies none). None: the task has no such corruption, and runs of it are not patched."""
        return None

    @classmethod
    def has_corruption(cls) -> bool:
        """Whether the task declares a corruption (overrides :meth:`corrupted`): derived, not listed."""
        return cls.corrupted is not Task.corrupted

    # Length generalisation. By default "longer" means what task.min_len..task.max_len bound: the same task
    # built for task.ood_min_len..task.ood_max_len, task.val_size examples. ood_min_len > max_len keeps the
    # set disjoint from training. A task whose inputs have another notion of length overrides these two.

    def check_ood(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> None:
        """Raise ConfigError when the longer set cannot be built (nothing to do when it is off)."""
        if check_ood_range(config):
            with ood_names():
                self.check(vocab, sentences, ood_config(config))

    def ood_pairs(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
                  rng: random.Random) -> Pairs:
        """The longer validation set; [] when it is off."""
        if not check_ood_range(config):
            return []
        with ood_names():
            return self.pairs(vocab, sentences, ood_config(config), rng)[1]


def distinct_examples(draw: Callable[[], tuple[list[int], list[int]]], count: int) -> Pairs:
    """``count`` (inputs, targets) pairs from ``draw()``, no input twice (so a train/val split is disjoint)."""
    examples: Pairs = []
    seen: set[tuple[int, ...]] = set()
    while len(examples) < count:
        inputs, targets = draw()
        if tuple(inputs) not in seen:
            seen.add(tuple(inputs))
            examples.append((inputs, targets))
    return examples


def values_passed_on(inputs: list[int], targets: list[int], pairs: int) -> tuple[list[int], list[int]]:
    """Recall's corruption, for inputs that open with ``pairs`` key-value pairs and ask for keys after them: each
    key gets the next key's value (the last key the first's), the rest kept; (that input, each query's implied
    target: its key's new value, PAD_ID where ``targets`` has none)."""
    keys, values = inputs[0:2 * pairs:2], inputs[1:2 * pairs:2]
    passed = values[1:] + values[:1]
    corrupted = [word for pair in zip(keys, passed, strict=True) for word in pair] + inputs[2 * pairs:]
    value_of = dict(zip(keys, passed, strict=True))
    return corrupted, [PAD_ID if target == PAD_ID else value_of[inputs[t]] for t, target in enumerate(targets)]


def first_sentence(sentences: Sequence[str]) -> list[str]:
    """The words of the corpus's first sentence that has any (a corpus holds one, see read_sentences)."""
    return next(words for sentence in sentences if (words := tokenize(sentence)))


def corpus_words(sentences: Sequence[str]) -> list[str]:
    """The corpus's distinct words in the order they first occur: a probe built from them reads like the corpus."""
    return list(dict.fromkeys(word for sentence in sentences for word in tokenize(sentence)))


def check_ood_range(config: TaskConfig) -> bool:
    """Whether the longer set is on; ConfigError for a half-set or inverted range, or one that overlaps training."""
    low, high = config.ood_min_len, config.ood_max_len
    if low is None and high is None:
        return False
    if low is None or high is None:
        missing = "task.ood_min_len" if low is None else "task.ood_max_len"
        raise ConfigError(f"{missing} is not set: the longer validation set needs both task.ood_min_len and "
                          "task.ood_max_len (or neither)")
    for key, value in (("task.ood_min_len", low), ("task.ood_max_len", high)):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"{key}={value} is invalid: it must be a positive integer")
    if low > high:
        raise ConfigError(f"task.ood_min_len={low} is invalid: it must be <= task.ood_max_len={high}")
    if low <= config.max_len:
        raise ConfigError(f"task.ood_min_len={low} is invalid: the longer validation set must be longer than "
                          f"training (task.max_len={config.max_len}); raise task.ood_min_len above it")
    return True


def ood_config(config: TaskConfig) -> TaskConfig:
    """The task's config for the longer set: its lengths, no training examples."""
    return dataclasses.replace(config, min_len=config.ood_min_len, max_len=config.ood_max_len, train_size=0)


@contextlib.contextmanager
def ood_names() -> Iterator[None]:
    """Inside it, a ConfigError about task.min_len / task.max_len names task.ood_min_len / task.ood_max_len:
    those are the lengths the longer set is built for."""
    try:
        yield
    except ConfigError as error:
        message = re.sub(r"task\.(min|max)_len", r"task.ood_\1_len", str(error))
        raise ConfigError(f"the longer validation set: {message}") from error


class SequenceTransformTask(Task):
    """Random word sequences of the vocabulary, lengths uniform in [min_len, max_len]; the target is a
    function of the input (copy, reverse, sort)."""

    def transform(self, ids: list[int], options: Any) -> list[int]:
        """The target of one input, under the task's :attr:`~Task.Options`: as many ids, PAD_ID where nothing is to
        be predicted."""
        raise NotImplementedError

    @staticmethod
    def available(vocab: Vocabulary, config: TaskConfig) -> int:
        words = len(vocab.words)
        return sum(words**length for length in range(config.min_len, config.max_len + 1))

    def check(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig) -> None:
        n, available = config.train_size + config.val_size, self.available(vocab, config)
        if available < n:
            raise ConfigError(
                f"task.train_size + task.val_size = {n} is invalid: the corpus's {len(vocab.words)} words make only "
                f"{available} distinct sequences of length {config.min_len}..{config.max_len}; use a larger corpus, "
                "longer lengths or fewer samples")

    def pairs(self, vocab: Vocabulary, sentences: Sequence[str], config: TaskConfig,
              rng: random.Random) -> tuple[Pairs, Pairs]:
        self.check(vocab, sentences, config)
        word_ids = [vocab.stoi[w] for w in vocab.words]
        seen: set[tuple[int, ...]] = set()
        while len(seen) < config.train_size + config.val_size:
            length = rng.randint(config.min_len, config.max_len)
            seen.add(tuple(rng.choice(word_ids) for _ in range(length)))
        sequences = [list(s) for s in sorted(seen)]  # sorted, then shuffled: independent of set order
        rng.shuffle(sequences)
        options = self.options_of(config)  # typed once, not for every sequence
        pairs = [(s, self.transform(s, options)) for s in sequences]
        return pairs[config.val_size:], pairs[:config.val_size]
