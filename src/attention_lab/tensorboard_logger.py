"""The run's TensorBoard logger: Lightning's, with the learning curves in the section a user sees first.

TensorBoard's Scalars and Time Series dashboards group the cards by the tag's first component and order them by
the tag (``compareTagNames`` in TensorBoard's frontend: character codes, numbers as numbers), so that the sections
of a run sort as ``attention``, ``attention_entropy``, ``epoch``, ``head_score``, ``hp``, ``lr-AdamW``,
``per_head`` (images), ``train``, ``val``: the learning curves came last. Here the loss and accuracy of every split are
written under :data:`SECTION`, whose capital letter sorts before every lowercase tag: the first section is the
learning curves, each card titled with its metric's own name (``Loss and accuracy/val/seq_acc``).

Only the tags of TensorBoard's scalars change: the metrics keep their names everywhere else (``metrics.json``,
``optimized_metric``, the monitored metrics, ``compare.py``, the attention tab, the HParams metrics ``hp/...``)."""

from __future__ import annotations

from collections.abc import Mapping

from lightning.pytorch.loggers import TensorBoardLogger as LightningTensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only

SECTION = "Loss and accuracy"
SPLITS = ("train", "val", "ood")  # training batches, the validation set, the longer inputs (task.ood_*)
CURVES = ("loss", "seq_acc", "token_acc")
LEARNING_CURVES = frozenset(f"{split}/{metric}" for split in SPLITS for metric in CURVES)


def tensorboard_tag(name: str) -> str:
    """The scalar tag of metric ``name`` in TensorBoard: a learning curve's under :data:`SECTION`, others as named."""
    return f"{SECTION}/{name}" if name in LEARNING_CURVES else name


class TensorBoardLogger(LightningTensorBoardLogger):
    """Lightning's TensorBoardLogger, writing every metric under :func:`tensorboard_tag`."""

    @rank_zero_only
    def log_metrics(self, metrics: Mapping[str, float], step: int | None = None) -> None:
        super().log_metrics({tensorboard_tag(name): value for name, value in metrics.items()}, step)
