"""Section C, third part: what the circuit metrics add to every validation, timed in-process on one thread (as
a run's torch has it by default) on the default run's model and validation set:

- the weight-based circuit scores (``composition/*`` and ``circuit/copying/*``, callbacks/circuit_scores.py);
- the prefix-matching probe (a forward of the repeated random words and its head scores, lit_module.py);
- the loss by target index (``val/loss_by_index/*``: the per-token loss and its sums, lit_module.py);

each the best of ``repeats`` timings, against one plain pass over the validation set (the forward passes a
validation makes anyway), and their sum times the validations of a default run against that run's wall time
(the training runs of the same benchmark). The model is as built: none of these costs depends on the weights.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from benchmarks.rows import Row, median


def best_of(repeats: int, run: Callable[[], object]) -> float:
    """The shortest of ``repeats`` wall times of ``run()``, in seconds (the least disturbed by the load)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return min(times)


def component_times(cfg: Any, repeats: int) -> dict[str, float]:
    """Seconds per validation of each circuit metric and of one plain validation pass, for the composed ``cfg``."""
    import torch
    import torch.nn.functional as F
    from hydra.utils import instantiate

    from attention_lab.analysis.ablation import score
    from attention_lab.analysis.circuits import circuit_scores, head_circuits
    from attention_lab.analysis.head_scores import PROBE_KINDS, head_scores
    from attention_lab.analysis.loss_by_index import LossByIndex
    from attention_lab.data.corpus import PAD_ID

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        datamodule = instantiate(cfg.data)
        datamodule.setup("validate")
        module = instantiate(cfg.module, vocab=datamodule.vocab.itos).eval()
        batches = list(datamodule.val_dataloader())
        with torch.no_grad():
            logits = [module(inputs) for inputs, _ in batches]

        def circuits() -> None:
            circuit_scores(head_circuits(module.model))

        def prefix_probe() -> None:
            probe = module.prefix_probe
            for weights in module.probe_weights():
                head_scores(weights, probe, probe != PAD_ID, PROBE_KINDS)

        def loss_by_index() -> None:
            metric = LossByIndex(module.config.context_length)
            for out, (_, targets) in zip(logits, batches, strict=True):
                metric.update(F.cross_entropy(out.transpose(1, 2), targets, ignore_index=PAD_ID, reduction="none"),
                              targets)
            metric.compute()

        with torch.no_grad():
            return {"validation_pass": best_of(repeats, lambda: score(module, batches)),
                    "circuit_scores": best_of(repeats, circuits),
                    "prefix_probe": best_of(repeats, prefix_probe),
                    "loss_by_index": best_of(repeats, loss_by_index)}
    finally:
        torch.set_num_threads(threads)


def validation_metric_rows(runs: dict[str, list[dict]], repeats: int = 5) -> tuple[list[Row], dict[str, Any]]:
    from benchmarks.compose import compose_train_config

    cfg = compose_train_config([])  # the default run's, as the training runs of section C
    times = component_times(cfg, repeats)
    added = times["circuit_scores"] + times["prefix_probe"] + times["loss_by_index"]
    every = int(cfg.trainer.val_check_interval)
    measured = [r for r in runs.get("maps_on", []) if r.get("steps")]
    rows = [Row("C", f"C/{name}_ms", description, times[name] * 1000, "ms", note=f"best of {repeats}, one thread")
            for name, description in (
                ("validation_pass", "one plain pass over the validation set (default run)"),
                ("circuit_scores", "circuit scores from the weights, per validation"),
                ("prefix_probe", "prefix-matching probe and its head scores, per validation"),
                ("loss_by_index", "loss by target index, per validation"))]
    rows.append(Row("C", "C/circuit_metrics_per_validation", "the three circuit metrics / one plain validation pass",
                    added / times["validation_pass"] * 100, "%"))
    shares = [added * (r["steps"] // every + 1) / r["process_s"] for r in measured]
    if shares:
        rows.append(Row("C", "C/circuit_metrics_run_share",
                        f"the circuit metrics x validations of a default run (every {every} steps and the final) "
                        "/ its wall time", median(shares) * 100, "%", samples=[s * 100 for s in shares]))
    return rows, {"circuit metrics per validation": added}
