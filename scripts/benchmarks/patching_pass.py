#!/usr/bin/env python
"""What the end-of-run passes over the validation set cost, in-process, for a preset whose task has a corruption:
one plain pass, the head ablation (``ablation_heads``) and the activation patching (``patch_heads``), each the best
of ``--repeats`` timings on one thread. The model is as built (the cost does not depend on the weights).

    python scripts/benchmarks/patching_pass.py                          # experiment=induction_heads, seed 0
    python scripts/benchmarks/patching_pass.py task=recall              # any overrides of scripts/train.py
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # scripts/: the benchmarks package



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("overrides", nargs="*", default=["experiment=induction_heads", "seed=0"])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()

    import torch
    from hydra.utils import instantiate

    from attention_lab.analysis.ablation import ablate_heads, score
    from attention_lab.analysis.patching import patch_heads
    from attention_lab.data.tasks import build_task
    from benchmarks.compose import compose_train_config
    from benchmarks.validation_metrics import best_of

    torch.set_num_threads(1)
    cfg = compose_train_config(args.overrides)
    datamodule = instantiate(cfg.data)
    datamodule.setup("validate")
    module = instantiate(cfg.module, vocab=datamodule.vocab.itos).eval()
    batches = list(datamodule.val_dataloader())
    task = build_task(cfg.task.name)
    for name, run in (("one plain pass", lambda: score(module, batches)),
                      ("head ablation", lambda: ablate_heads(module, batches)),
                      ("activation patching", lambda: patch_heads(module, batches, task, bool(cfg.task.bos)))):
        print(f"{name:20s} {best_of(args.repeats, run):.3f} s")
    print(f"load average {Path('/proc/loadavg').read_text().split()[0]}")


if __name__ == "__main__":
    main()
