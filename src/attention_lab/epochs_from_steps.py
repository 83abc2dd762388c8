"""A run bounded by ``max_steps`` alone has no epoch limit: Lightning keeps ``max_epochs=-1``, which the
progress bar shows as "Epoch 0/-2". When the batches of an epoch are known before the Trainer is built, the
Trainer gets the number of epochs that ``max_steps`` spans (its own ``max_epochs`` argument), so the bar reads
"Epoch 3/23"; the limit never binds before ``max_steps`` does. Where an epoch's batches depend on what only the
Trainer knows (several devices or nodes, ``limit_train_batches``), no bound is set and the bar shows -2."""

from __future__ import annotations

import math
from typing import Any


def epochs_for_steps(trainer: Any, batches: int, *, resuming: bool) -> int | None:
    """``trainer`` is the run's trainer config; ``batches``, the training batches of one epoch on one device."""
    if trainer.get("max_epochs") not in (None, -1) or (trainer.get("max_steps") or -1) <= 0 or batches <= 0:
        return None
    if any(trainer.get(key) not in (None, *plain) for key, plain in
           (("devices", (1, "1", "auto")), ("num_nodes", (1,)), ("limit_train_batches", (1.0,)),
            ("strategy", ("auto",)))):
        return None
    steps_per_epoch = math.ceil(batches / int(trainer.get("accumulate_grad_batches") or 1))
    # A resumed run may stand anywhere in its epoch: one more, so that max_steps is what ends it.
    return math.ceil(trainer.max_steps / steps_per_epoch) + (1 if resuming else 0)
