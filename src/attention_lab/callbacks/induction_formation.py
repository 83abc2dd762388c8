"""When the induction heads form: at every validation during training, the loss, the in-context score, the best
head scores, the best composition score of each kind (q, k, v: :mod:`attention_lab.analysis.circuits`, over every pair of
a writer head and a later reader head) and the loss at each target index (a list, index 0 first) are kept; at the end the run records

- ``formation_step``: the first validation at which a head above the first layer scores ``threshold`` or more on
  the induction detector (an induction head needs a previous-token head below it to read from; a one-layer model
  has no head above layer 0 and records None, even where its layer-0 heads score high, as with smeared keys, and
  even when it solves the task: solving is a rule of its own, ``steps_to_solve``);
- ``loss_drop_step``: the end of the validation interval over which ``val/loss`` fell the most;

and the whole history (``formation`` in metrics.json), from which ``compare.py --plot`` draws the curves. Kept in
checkpoints, so a resumed run keeps the history of the original one."""

from __future__ import annotations

from typing import Any

import lightning as L

from attention_lab.analysis.formation_rule import MIN_LAYER, THRESHOLD
from attention_lab.analysis.tags import COMPOSITIONS, HeadMetric, by_index, composition_prefix, score_family
from attention_lab.callbacks.findings import Findings

SERIES = ("step", "val/loss", "val/in_context_score", "previous_token", "induction", "induction_later_layers",
          *(f"composition_{kind}" for kind in COMPOSITIONS), "loss_by_index")


def best_scores(metrics: dict[str, float], kind: str, min_layer: int = 0) -> float | None:
    """The highest ``head_score/<kind>`` of any head in layers >= ``min_layer``, or None when none is logged."""
    values = [value for name, value in metrics.items()
              if (record := HeadMetric.parse(name)) is not None and record.family == score_family(kind)
              and record.layer >= min_layer]
    return max(values) if values else None


def best_composition(metrics: dict[str, float], kind: str) -> float | None:
    """The highest ``composition/<kind>/...`` score of any writer-reader pair, or None when none is logged."""
    values = [value for name, value in metrics.items() if name.startswith(composition_prefix(kind))]
    return max(values) if values else None


def loss_drop_step(steps: list[int], losses: list[float | None]) -> int | None:
    """The step that ends the validation interval with the largest fall of the loss."""
    falls = [(before - after, step) for step, before, after in zip(steps[1:], losses, losses[1:], strict=False)
             if before is not None and after is not None]
    return max(falls)[1] if falls else None


class InductionFormation(Findings):
    def __init__(self, threshold: float = THRESHOLD) -> None:
        self.threshold = threshold
        self.history: dict[str, list] = {name: [] for name in SERIES}

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != "fit":
            return
        metrics = {name: float(value) for name, value in trainer.callback_metrics.items()}
        if self.history["step"] and self.history["step"][-1] == trainer.global_step:
            return
        row = {"step": trainer.global_step, "val/loss": metrics.get("val/loss"),
               "val/in_context_score": metrics.get("val/in_context_score"),
               "previous_token": best_scores(metrics, "previous_token"),
               "induction": best_scores(metrics, "induction"),
               "induction_later_layers": best_scores(metrics, "induction", min_layer=MIN_LAYER),
               **{f"composition_{kind}": best_composition(metrics, kind) for kind in COMPOSITIONS},
               "loss_by_index": by_index(metrics)}
        for name in SERIES:
            self.history[name].append(row[name])

    def formation_step(self) -> int | None:
        for step, score in zip(self.history["step"], self.history["induction_later_layers"], strict=True):
            if score is not None and score >= self.threshold:
                return step
        return None

    def findings(self) -> dict[str, Any]:
        return {"formation_step": self.formation_step(),
                "loss_drop_step": loss_drop_step(self.history["step"], self.history["val/loss"]),
                "formation": {"threshold": self.threshold, **self.history}}

    def state_dict(self) -> dict[str, Any]:
        return {"history": self.history}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.history = {name: list(state_dict.get("history", {}).get(name, [])) for name in SERIES}
