"""Section C, fourth part: what attribution patching (callbacks/attribution.py) adds to the validations of a run
where it is active. The default run's ``task=reverse`` has no corruption: there it is one check, nothing measured.
So it is timed in-process, on one thread (as a run's torch has it by default), on the default run's model with
``task=induction`` (and ``mask=causal``, which that task needs), the only change, and its validation set:

- the pass at a validation during training, on the callback's first ``EXAMPLES`` examples;
- the pass at the final validation, on the whole validation set (activation patching's batches);

each the best of ``repeats`` timings, against one plain pass over the validation set; then the passes of a
default-length run, one per ``val_check_interval`` steps and the final one, against that run's wall time (the
training runs of the same benchmark). The model is as built: the cost does not depend on the weights.
"""

from __future__ import annotations

from typing import Any

from benchmarks.rows import Row, check, median

OVERRIDES = ["task=induction", "mask=causal"]  # the default run, with a task that has a corruption
LIMIT = 0.03  # attribution at every validation within 3 % of a default run's wall time


def attribution_times(repeats: int) -> dict[str, float]:
    """Seconds per validation: one plain pass, attribution during training and at the final validation."""
    import torch
    from hydra.utils import instantiate

    from attention_lab.analysis.ablation import score
    from attention_lab.analysis.attribution import attribute_batches
    from attention_lab.callbacks.attribution import EXAMPLES, AttributionPatching, first_examples
    from benchmarks.compose import compose_train_config
    from benchmarks.validation_metrics import best_of

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        cfg = compose_train_config(OVERRIDES)
        datamodule = instantiate(cfg.data)
        datamodule.setup("validate")
        module = instantiate(cfg.module, vocab=datamodule.vocab.itos).eval()
        batches = list(datamodule.val_dataloader())
        callback = AttributionPatching(cfg.task)  # its corruption, as the run's callback makes it each time
        during = first_examples(batches, EXAMPLES)
        with torch.no_grad():
            plain = best_of(repeats, lambda: score(module, batches))
        return {"validation_pass": plain,
                "during_training": best_of(repeats, lambda: attribute_batches(module, callback.corrupted(during))),
                "final": best_of(repeats, lambda: attribute_batches(module, callback.corrupted(batches)))}
    finally:
        torch.set_num_threads(threads)


def attribution_rows(runs: dict[str, list[dict]], repeats: int = 5) -> tuple[list[Row], dict[str, Any]]:
    from attention_lab.callbacks.attribution import EXAMPLES
    from benchmarks.compose import compose_train_config

    times = attribution_times(repeats)
    every = int(compose_train_config([]).trainer.val_check_interval)
    measured = [r for r in runs.get("maps_on", []) if r.get("steps")]
    note = f"best of {repeats}, one thread; {' '.join(OVERRIDES)} (the default task=reverse has no corruption)"
    rows = [Row("C", f"C/attribution_{name}_ms", description, times[name] * 1000, "ms", note=note)
            for name, description in (
                ("during_training", f"attribution patching at a validation during training ({EXAMPLES} examples)"),
                ("final", "attribution patching at the final validation (the whole validation set)"))]
    rows.append(Row("C", "C/attribution_per_validation", "attribution during training / one plain validation pass",
                    times["during_training"] / times["validation_pass"] * 100, "%"))
    shares = [(times["during_training"] * (r["steps"] // every) + times["final"]) / r["process_s"] for r in measured]
    share = median(shares) if shares else None
    rows.append(Row("C", "C/attribution_run_share",
                    f"attribution at the validations of a default run (every {every} steps, and the final one on "
                    "the whole set) / its wall time, where the task has a corruption", None if share is None else
                    share * 100, "%", target=f"<= {LIMIT * 100:.0f} %", ok=check(share, "<=", LIMIT),
                    samples=[s * 100 for s in shares]))
    return rows, {"attribution run share": share}
