"""A trained run in Python in one call: ``attention_lab.load_run(path)`` (docs/library.md, "A trained run in
Python").

It finds the run's checkpoint and loads it as the review tools and the attention tab do
(:func:`attention_lab.review.maps.find_run` and :func:`~attention_lab.review.maps.load_module`: ``weights_only``,
within the bounds of :mod:`attention_lab.model_bounds`), so a checkpoint that they refuse is refused here too, in
the same line."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from attention_lab.review.maps import find_run, load_module

if TYPE_CHECKING:
    from attention_lab.model import TrainedModel


def load_run(path: str | Path) -> TrainedModel:
    """The trained model of a run dir (its ``checkpoints/last.ckpt``, the model its metrics.json describes) or of
    a ``.ckpt`` file, in eval mode on the CPU: ``.vocab`` its words (index = token id), ``.predict_words`` a
    sentence's predictions and attention maps, ``.model`` the SequenceModel whose hook points
    (:mod:`attention_lab.attention.hooks`) ablate and patch heads. Raises
    :class:`attention_lab.review.cli.ReviewError` (one line) when ``path`` holds no run or its checkpoint is
    refused."""
    model, _step = load_module(find_run(path))
    return model
