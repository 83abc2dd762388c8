"""When the induction heads form: at every validation during training, the loss, the in-context score, the best
head scores (the induction detector's also per layer), the best prefix matching on the rotated-repeat probe, the
heads that meet the formation rule, the best composition score of each kind (q, k, v:
:mod:`attention_lab.analysis.circuits`, over every pair of a writer head and a later reader head) and the loss at
each target index (a list, index 0 first) are kept; at the end the run records

- ``formation_step``: the first validation at which some head meets the rule of
  :mod:`attention_lab.analysis.formation_rule` (prefix matching on the rotated-repeat probe at least ``threshold``,
  and below it once the previous token's supply, the layers below, is removed): the same rule for every depth;
  solving is a rule of its own, ``steps_to_solve``;
- ``loss_drop_step``: the end of the validation interval over which ``val/loss`` fell the most;

and the whole history (``formation`` in metrics.json), from which ``compare.py --plot`` draws the curves. Kept in
checkpoints, so a resumed run keeps the history of the original one."""

from __future__ import annotations

from typing import Any

import lightning as L
import torch

from attention_lab.analysis.formation_heads import formed_heads
from attention_lab.analysis.formation_rule import THRESHOLD
from attention_lab.analysis.tags import COMPOSITIONS, HeadMetric, by_index, composition_prefix, score_family
from attention_lab.callbacks.findings import Findings

SERIES = ("step", "val/loss", "val/in_context_score", "previous_token", "induction", "induction_by_layer",
          "prefix_matching", "formed", *(f"composition_{kind}" for kind in COMPOSITIONS), "loss_by_index")


def best_scores(metrics: dict[str, float], kind: str) -> float | None:
    """The highest ``head_score/<kind>`` of any head, or None when none is logged."""
    values = [value for name, value in metrics.items()
              if (record := HeadMetric.parse(name)) is not None and record.family == score_family(kind)]
    return max(values) if values else None


def best_by_layer(metrics: dict[str, float], kind: str) -> list[float | None]:
    """The highest ``head_score/<kind>`` of each layer, layer 0 first (None for a layer with none logged)."""
    best: dict[int, float] = {}
    for name, value in metrics.items():
        if (record := HeadMetric.parse(name)) is not None and record.family == score_family(kind):
            best[record.layer] = max(value, best.get(record.layer, value))
    return [best.get(layer) for layer in range(max(best) + 1)] if best else []


def rule_heads(pl_module: L.LightningModule, threshold: float) -> list[dict[str, Any]]:
    """The heads of the module's model that meet the formation rule on its prefix-matching probe
    (``prefix_probe``), each with its score and its score without the previous token's supply; none for a module
    without that probe or whose queries are not the input's positions (an encoder-decoder)."""
    model, probe = getattr(pl_module, "model", None), getattr(pl_module, "prefix_probe", None)
    if model is None or probe is None or getattr(model, "encoder_decoder", False):
        return []
    device = next(model.parameters(), torch.empty(0)).device
    return [{"head": f"layer{layer}/head{head}", "score": score, "without_supply": without}
            for layer, head, score, without in formed_heads(model, probe.to(device), threshold)]


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
               "induction_by_layer": best_by_layer(metrics, "induction"),
               "prefix_matching": best_scores(metrics, "prefix_matching"),
               "formed": rule_heads(pl_module, self.threshold),
               **{f"composition_{kind}": best_composition(metrics, kind) for kind in COMPOSITIONS},
               "loss_by_index": by_index(metrics)}
        for name in SERIES:
            self.history[name].append(row[name])

    def formation_step(self) -> int | None:
        return next((step for step, heads in zip(self.history["step"], self.history["formed"], strict=True) if heads),
                    None)

    def findings(self) -> dict[str, Any]:
        return {"formation_step": self.formation_step(),
                "loss_drop_step": loss_drop_step(self.history["step"], self.history["val/loss"]),
                "formation": {"threshold": self.threshold, **self.history}}

    def state_dict(self) -> dict[str, Any]:
        return {"history": self.history}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        # A series the checkpoint's history lacks (one written before the series existed) is None at its steps.
        saved = state_dict.get("history", {})
        steps = len(saved.get("step", []))
        self.history = {name: list(saved.get(name, [None] * steps)) for name in SERIES}
