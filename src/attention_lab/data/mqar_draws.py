"""task=mqar's inputs drawn as tensors, many at once (:mod:`attention_lab.data.tasks.mqar` says what an input is).

Per input, as Zoology's ``multiquery_ar`` draws it: the keys, an ordered sample without replacement of the key half
(:func:`ordered_sample`); the values, the same from the value half; the query
slots, a weighted sample without replacement of the slots in the order drawn, with weights (g + 1)^(a − 1): each
slot's exponential clock runs at its weight, and the slots whose clocks ring first are taken in that order, which is
numpy's choice without replacement (each draw ∝ the weights of the slots left). Key i is asked at the i-th slot.

Training inputs come in chunks of a fixed number of rows, each chunk from a generator of its own seed: the first M
of N inputs are the same for every N ≥ M, so a run with more steps sees the shorter run's inputs first. Validation
comes from a generator of its own: the same for every task.train_size. Validation inputs are distinct, and a
training input equal to one of them is drawn again, so that the two sets are disjoint."""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from attention_lab.data.corpus import PAD_ID
from attention_lab.data.tensors import Examples

# Training inputs are drawn this many at a time, each chunk whole from its own seed (the last one too, then cut):
# what an input is cannot depend on how many are drawn. Small enough to bound one chunk's temporary draws.
CHUNK_ROWS = 8192


@dataclass(frozen=True)
class MqarShape:
    """What one input is made of: the key and value halves' ids, the pairs, the length, the slots' weights."""

    keys: torch.Tensor  # (K,) ids of the key half
    values: torch.Tensor  # (V,) ids of the value half
    pairs: int
    max_len: int
    weights: torch.Tensor  # (slots,) float64, (g + 1)^(a − 1) for slot g


def draw(shape: MqarShape, count: int, generator: torch.Generator) -> Examples:
    """``count`` independent inputs and their targets, (count, max_len) each."""
    examples = (torch.empty(count, shape.max_len, dtype=torch.long), torch.empty(count, shape.max_len, dtype=torch.long))
    draw_into(shape, examples, generator)
    return examples


def draw_into(shape: MqarShape, examples: Examples, generator: torch.Generator) -> None:
    """Fills (inputs, targets), two (count, max_len) tensors, with ``count`` independent inputs and their targets."""
    inputs, targets = examples
    count, pairs = inputs.shape[0], shape.pairs
    keys = shape.keys[ordered_sample(count, len(shape.keys), pairs, generator)]
    values = shape.values[ordered_sample(count, len(shape.values), pairs, generator)]
    clocks = torch.empty(count, len(shape.weights), dtype=torch.float64).exponential_(generator=generator)
    slots = (clocks / shape.weights).topk(pairs, dim=1, largest=False).indices  # first to ring, in ringing order
    inputs.fill_(PAD_ID)
    targets.fill_(PAD_ID)
    inputs[:, 0:2 * pairs:2], inputs[:, 1:2 * pairs:2] = keys, values
    positions = 2 * pairs + 2 * slots
    inputs.scatter_(1, positions, keys)
    targets.scatter_(1, positions, values)


def ordered_sample(count: int, size: int, taken: int, generator: torch.Generator) -> torch.Tensor:
    """(count, taken) indices into range(size), distinct within a row, uniform over the ordered samples: the i-th is
    uniform among the size - i not yet taken (a rank among them, moved past each taken index at or below it, those
    visited in ascending order)."""
    chosen = torch.empty(count, taken, dtype=torch.long)
    for i in range(taken):
        pick = torch.randint(0, size - i, (count,), generator=generator)
        for earlier in chosen[:, :i].sort(dim=1).values.unbind(1):
            pick += pick >= earlier
        chosen[:, i] = pick
    return chosen


def seeded(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def draw_sets(shape: MqarShape, train_size: int, val_size: int, rng: random.Random) -> tuple[Examples, Examples]:
    """(training, validation) inputs, deterministic for ``rng``'s state; the caller checks that more distinct inputs
    exist than ``val_size`` (else no training input could differ from them all)."""
    val_seed, train_seed = rng.getrandbits(63), rng.getrandbits(63)
    val = distinct(shape, val_size, seeded(val_seed))
    known = KnownRows(val[0])
    train = (torch.empty(train_size, shape.max_len, dtype=torch.long),
             torch.empty(train_size, shape.max_len, dtype=torch.long))
    for index, start in enumerate(range(0, train_size, CHUNK_ROWS)):
        generator = seeded((train_seed + index) % 2**63)
        whole = start + CHUNK_ROWS <= train_size
        chunk = (train[0][start:start + CHUNK_ROWS], train[1][start:start + CHUNK_ROWS])
        if not whole:  # the last, partial chunk: drawn whole as the longer runs draw it, then cut
            chunk = draw(shape, CHUNK_ROWS, generator)
        else:
            draw_into(shape, chunk, generator)
        known.redraw(shape, chunk, generator)
        if not whole:
            train[0][start:], train[1][start:] = chunk[0][:train_size - start], chunk[1][:train_size - start]
    return train, val


def distinct(shape: MqarShape, count: int, generator: torch.Generator) -> Examples:
    """``count`` distinct inputs: draws, keeping each input's first occurrence, until there are enough."""
    inputs, targets = draw(shape, 0, generator)
    while len(inputs) < count:
        more = draw(shape, count - len(inputs), generator)
        inputs, targets = torch.cat([inputs, more[0]]), torch.cat([targets, more[1]])
        first: dict[tuple[int, ...], int] = {}
        for index, row in enumerate(inputs.tolist()):
            first.setdefault(tuple(row), index)
        keep = torch.tensor(sorted(first.values()), dtype=torch.long)
        inputs, targets = inputs[keep], targets[keep]
    return inputs, targets


class KnownRows:
    """The validation inputs, to find a training input equal to one of them: each row's fingerprint (its ids times
    fixed odd numbers, one per position, summed in wrapping int64) first, so that equal rows are suspects at once,
    then the few suspects exactly."""

    def __init__(self, inputs: torch.Tensor) -> None:
        self.rows = {tuple(row) for row in inputs.tolist()}
        self.fingerprints = row_fingerprints(inputs).unique()  # sorted

    def redraw(self, shape: MqarShape, examples: Examples, generator: torch.Generator) -> None:
        """Draws each input of ``examples`` that is a known row again (from ``generator``), in place, until none is."""
        inputs, targets = examples
        while True:
            again = [row for row in self.suspects(inputs) if tuple(inputs[row].tolist()) in self.rows]
            if not again:
                return
            rows = torch.tensor(again, dtype=torch.long)
            inputs[rows], targets[rows] = draw(shape, len(again), generator)

    def suspects(self, inputs: torch.Tensor) -> list[int]:
        """The rows whose fingerprint a known row has (a binary search in the sorted fingerprints)."""
        if len(self.fingerprints) == 0:
            return []
        fingerprints = row_fingerprints(inputs)
        found = torch.searchsorted(self.fingerprints, fingerprints).clamp(max=len(self.fingerprints) - 1)
        return (self.fingerprints[found] == fingerprints).nonzero().flatten().tolist()


FINGERPRINT_SEED = 0x5EED  # fixed: the fingerprints only compare rows within one run


def row_fingerprints(inputs: torch.Tensor) -> torch.Tensor:
    """(N,) int64: equal rows have equal fingerprints; different rows rarely do (and are then told apart exactly)."""
    weights = torch.randint(-2**62, 2**62, (inputs.shape[1],), generator=seeded(FINGERPRINT_SEED), dtype=torch.long)
    return (inputs * (weights | 1)).sum(dim=1)
