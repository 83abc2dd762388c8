"""The scalars each validation logs, declared once: the LightningModule logs through this declaration
(:meth:`attention_lab.lit_module.AttentionLitModule.log_validation`), ``optimized_metric``'s check accepts what it
declares for the run (:func:`attention_lab.checks.check_optimized_metric`), and docs/configuration.md's table of
them, which the knob's help points to, is written from it (``make docs``). A new scalar is one entry here and its
value in the module's ``validation_step``: the module refuses a declared scalar it has no value for, and
tests/analysis/test_validation_metrics.py checks that a run logs exactly what is declared.

Tags: ``<split>/<name>``, split ``val`` (the validation set) or ``ood`` (the longer set of ``task.ood_min_len`` ..
``task.ood_max_len``, when there is one). The per-head values and the loss by target index are named in
:mod:`attention_lab.analysis.tags`: neither is a scalar of this list.

Light (no torch import): the config checks use it.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ValidationMetric", "measured", "measured_tags"]

VAL, OOD = "val", "ood"
SPLITS = (VAL, OOD)  # the validation sets, in the order of the datamodule's dataloaders (dataloader_idx)
# The runs that measure a split, as the docs say it (the validation set: every run).
SPLIT_RUNS = {OOD: "with a longer validation set (`task.ood_min_len`, `task.ood_max_len`)"}

LOSS, TOKEN_ACC, SEQ_ACC, IN_CONTEXT_SCORE = "loss", "token_acc", "seq_acc", "in_context_score"


@dataclass(frozen=True)
class ValidationMetric:
    """One scalar of a validation: its name and meaning, the sets that measure it, and the one task whose runs
    measure it (None: every task's)."""

    name: str
    meaning: str  # what docs/configuration.md's table says of it
    splits: tuple[str, ...] = SPLITS
    task: str | None = None
    progress_bar: bool = False  # shown on the progress bar too (of the validation set only: the bar stays short)

    def tag(self, split: str) -> str:
        return f"{split}/{self.name}"

    def measured(self, split: str, task: str) -> bool:
        return split in self.splits and self.task in (None, task)


# In the order the module logs them, which is the order of the final metrics table and of metrics.json's headline.
VALIDATION_METRICS = (
    ValidationMetric(LOSS, "the cross-entropy of the real (non-pad) targets, in nats: their mean over the whole set, "
                     "each target counted once, whatever the batches", progress_bar=True),
    ValidationMetric(TOKEN_ACC, "the share of the real targets predicted right"),
    ValidationMetric(SEQ_ACC, "the share of the sequences whose every real target is right", progress_bar=True),
    ValidationMetric(IN_CONTEXT_SCORE, "the loss at the last target of each sequence minus at its first, averaged, "
                     "in nats (Olsson et al.): negative when the repeat is read from context", splits=(VAL,),
                     task="induction"),
)


def measured(split: str, task: str) -> list[ValidationMetric]:
    """The scalars a validation of ``split`` logs in a run of ``task``, in the order it logs them."""
    return [metric for metric in VALIDATION_METRICS if metric.measured(split, task)]


def measured_tags(task: str, *, ood: bool) -> list[str]:
    """Every scalar tag the final validation of a run of ``task`` logs (``ood``: the run has the longer set)."""
    return [metric.tag(split) for split in SPLITS if split == VAL or ood for metric in measured(split, task)]
