"""When the probe's attention is logged (the attention tab's records and the predictions): densely while the
heads form, sparser as training goes on, so that the tab's slider can show a mechanism forming in the first
hundred steps and a long run still writes few records.

``every_n_steps`` (``log_attention_every_n_steps``) is the first interval: every ``n`` steps up to step ``20 n``,
then the interval doubles each time the step doubles (10 records per doubling). With n = 10: steps 10, 20, ...,
190, then 200, 220, ..., 380, then 400, 440, ... At the end of training every logger logs once more.

The predictions (text) keep one record per doubling, at steps 10 n, 20 n, 40 n, ...: a text tag's steps beyond
TensorBoard's default reservoir of 10 would be dropped at random, and each record costs a forward pass."""

from __future__ import annotations

DENSE = 20  # intervals of every_n_steps before the first doubling


def interval_at(step: int, every_n_steps: int) -> int:
    """The logging interval in force at ``step``: ``every_n_steps`` times 2^k, k = log2(step / (DENSE/2 n)) rounded
    down (0 before step ``DENSE n``)."""
    return every_n_steps << max(0, (step // (DENSE // 2 * every_n_steps)).bit_length() - 1)


def is_logged(step: int, every_n_steps: int) -> bool:
    """Whether training step ``step`` (a global step, from 1) logs the probe's attention."""
    return step > 0 and step % interval_at(step, every_n_steps) == 0


def is_doubling(step: int, every_n_steps: int) -> bool:
    """Whether ``step`` is one where the interval doubles: ``DENSE/2 n`` times a power of two (100, 200, 400, ...
    with n = 10)."""
    first = DENSE // 2 * every_n_steps
    return step > 0 and step % first == 0 and (step // first).bit_count() == 1


def logged_steps(max_steps: int, every_n_steps: int) -> list[int]:
    """The steps 1..``max_steps`` that log, in order (the end of training logs as well, once more if it is not
    among them)."""
    return [step for step in range(1, max_steps + 1) if is_logged(step, every_n_steps)]
