"""A Lightning profiler that times one callback's hooks, and nothing else.

Lightning wraps every callback hook in ``trainer.profiler.profile("[Callback]<name>.<hook>")``; a custom
profiler (a subclass of ``Profiler``, Lightning's documented extension point) sees each call start and stop.
Added to a run by a Hydra override of ``trainer.profiler`` (see benchmarks.training). Every other action
costs one string comparison, so the run keeps its speed (SimpleProfiler would time every hook).
"""

from __future__ import annotations

import time
from collections import defaultdict

from lightning.pytorch.profilers import Profiler


class CallbackHookProfiler(Profiler):
    """Seconds of every call of the hooks of the callback whose class is named ``callback``."""

    def __init__(self, callback: str = "ProbeLogger") -> None:
        super().__init__()
        self.prefix = f"[Callback]{callback}."
        self.started: dict[str, float] = {}
        self.durations: dict[str, list[float]] = defaultdict(list)  # hook name -> seconds of each call

    def start(self, action_name: str) -> None:
        if action_name.startswith(self.prefix):
            self.started[action_name] = time.perf_counter()

    def stop(self, action_name: str) -> None:
        start = self.started.pop(action_name, None)
        if start is not None:
            self.durations[action_name.removeprefix(self.prefix)].append(time.perf_counter() - start)

    def summary(self) -> str:
        return "".join(f"{self.prefix}{hook}: {len(calls)} calls, {sum(calls):.3f} s\n"
                       for hook, calls in self.durations.items())
