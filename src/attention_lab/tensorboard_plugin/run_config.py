"""What the tab takes from a run's saved config (``.hydra/config.yaml``): the layers, heads and target indices the
model had, which bound the per-head and per-index tags the tab reads, the head-score kind of its task, which
the tab opens on, and the steps at which it clamped heads (the ``clamp``, ``clamp_from`` and ``clamp_until`` knobs),
which the step slider marks.

An event file may log tags for heads and indices that the model never had, and each such tag widens a grid to
its layer, head or index (one composition tag of head 63 makes a 64 x 64 grid of empty cells). So the tab reads
only the tags of the layers, heads and indices that the run's config declares, and, for a run without a readable
config (one trained before configs were saved, or a logdir of bare event files), those within the tab's limits.

The config is read as data through the lab's bounded reader: nothing in it is resolved or built, except that a
value written exactly as ``${knob}`` (how Hydra saves ``model.layers: ${layers}``) is the top-level knob's value.
Each config is read once, and again only when its size or modification time changes: the tab asks at every
request, and a config of a megabyte takes seconds to parse.
"""

from __future__ import annotations

import logging
import re
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from attention_lab.data.tasks import task_head_score_kind
from attention_lab.records.files import SAVED_CONFIG, UnreadableRecord, read_yaml_record
from attention_lab.tensorboard_plugin.limits import (
    MAX_CLAMP_PATTERN_CHARS,
    MAX_CLAMP_PATTERNS,
    MAX_HEADS,
    MAX_INDICES,
    MAX_LAYERS,
    MAX_STEP,
)
from attention_lab.tensorboard_plugin.sentence import inside

log = logging.getLogger(__name__)

KNOB = re.compile(r"\$\{(\w+)\}")


@dataclass(frozen=True)
class RunSizes:
    """How many layers, heads (per layer) and target indices the tab reads of a run, and where they come from
    (``source``: named in the line of an answer refused as too large)."""

    layers: int
    heads: int
    indices: int
    source: str

    def holds(self, layer: int, head: int | None = None) -> bool:
        """Whether ``layer`` (and ``head``; None: the whole layer) lie within these sizes."""
        return layer < self.layers and (head is None or head < self.heads)

    def holds_index(self, index: int) -> bool:
        return index < self.indices


TAB_LIMITS = RunSizes(MAX_LAYERS, MAX_HEADS, MAX_INDICES, "the attention tab's limits")


@dataclass(frozen=True)
class Clamp:
    """The heads a run clamped (``patterns``, as its ``clamp`` knob lists them) at the steps in [start, until)
    (``until`` None: to the end of the run)."""

    patterns: tuple[str, ...]
    start: int
    until: int | None

    def to_json(self) -> dict:
        return {"heads": list(self.patterns), "from": self.start, "until": self.until}


class BadClamp(ValueError):
    """A clamp knob of a saved config that the tab does not read: ``setting`` and what is wrong with it."""

    def __init__(self, setting: str, problem: str) -> None:
        super().__init__(f"{setting} {problem}")
        self.setting, self.problem = setting, problem


@dataclass(frozen=True)
class RunConfig:
    """What the tab takes from one run's config: the sizes of its tags, its task's head-score kind (None: no
    config, or a task without one), and the steps it clamped heads at (None: none, or a run from before the knobs)."""

    sizes: RunSizes = TAB_LIMITS
    task_kind: str | None = None
    clamp: Clamp | None = None


def knob(data: dict, value: Any) -> Any:
    """``value``, or the top-level value it names when it is written exactly ``${name}``."""
    found = KNOB.fullmatch(value) if isinstance(value, str) else None
    return data.get(found.group(1)) if found else value


def positive(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def declared_sizes(data: dict) -> RunSizes:
    """The sizes a saved config declares (each within the tab's limits; the tab's limit where it declares none).

    Layers: the length of ``model.mixers`` (a hybrid stack) or ``model.layers``. Heads: ``model.num_heads``, else
    the ``heads`` knob (Hydra saves num_heads as a resolver of it; a single-head variant has one head, fewer than
    the knob, which still bounds it). Indices: ``model.context_length``, the rows of the loss-by-index metric."""
    model = data.get("model")
    if not isinstance(model, dict):
        return TAB_LIMITS
    mixers = knob(data, model.get("mixers"))
    layers = len(mixers) if isinstance(mixers, list) and mixers else positive(knob(data, model.get("layers")))
    heads = positive(knob(data, model.get("num_heads"))) or positive(data.get("heads"))
    indices = positive(knob(data, model.get("context_length")))
    return RunSizes(min(layers or MAX_LAYERS, MAX_LAYERS), min(heads or MAX_HEADS, MAX_HEADS),
                    min(indices or MAX_INDICES, MAX_INDICES), f"its config ({SAVED_CONFIG.as_posix()})")


def step_knob(data: dict, name: str, default: int | None) -> int | None:
    """The step a knob names (``default`` where the config has none; None is "the end" where default is None)."""
    value = data.get(name, default)
    if value is None and default is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_STEP:
        raise BadClamp(name, f"is {str(value)[:40]!r}, not a step from 0 to {MAX_STEP}")
    return value


def clamp_window(data: dict) -> Clamp | None:
    """The steps a config's clamp knobs clamp heads at: None for a run without the knobs, an empty list or an
    empty window. Raises BadClamp for values the lab never writes (checked types, bounded sizes)."""
    patterns = data.get("clamp")
    if patterns is None:
        return None
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise BadClamp("clamp", "is not a list of layer/head patterns")
    if len(patterns) > MAX_CLAMP_PATTERNS:
        raise BadClamp("clamp", f"lists {len(patterns)} patterns, more than the {MAX_CLAMP_PATTERNS} the tab shows")
    if any(len(p) > MAX_CLAMP_PATTERN_CHARS for p in patterns):
        raise BadClamp("clamp", f"has a pattern longer than the {MAX_CLAMP_PATTERN_CHARS} characters the tab shows")
    start, until = step_knob(data, "clamp_from", 0), step_knob(data, "clamp_until", None)
    if not patterns or (until is not None and until <= start):
        return None
    return Clamp(tuple(patterns), start, until)


def run_config(data: Any, path: Path | None = None) -> RunConfig:
    """What the tab takes from a config's data (as read, unresolved); clamp knobs it cannot read are warned about
    (once: a config is read once per version) and mark no steps."""
    if not isinstance(data, dict):
        return RunConfig()
    try:
        kind = task_head_score_kind(data.get("task"))
    except (TypeError, ValueError):  # a task's name or options of a type the lab never writes
        kind = None
    try:
        clamp = clamp_window(data)
    except BadClamp as err:
        log.warning("the attention tab marks no clamped steps of %s: %s %s", path or "a run", err.setting, err.problem)
        clamp = None
    return RunConfig(declared_sizes(data), kind, clamp)


class RunConfigs:
    """Each run dir's :class:`RunConfig`, kept by the config's path and read again only when the file's size or
    modification time changes; a config the tab cannot read is not read (nor warned about) again."""

    def __init__(self) -> None:
        self.kept: dict[Path, tuple[tuple[int, int], RunConfig]] = {}
        self.lock = threading.Lock()

    def of(self, root: Path, run_dir: Path) -> RunConfig:
        """What ``run_dir``'s config declares; it must lie inside ``root`` (the logdir) and be a file, else (or
        without one) nothing: the tab's limits and no task."""
        try:
            path = (run_dir / SAVED_CONFIG).resolve()
            status = path.stat()
        except (OSError, RuntimeError):  # missing, unreadable, or a loop of links
            return RunConfig()
        if not inside(root, path) or not stat.S_ISREG(status.st_mode):
            return RunConfig()
        key = (status.st_size, status.st_mtime_ns)
        with self.lock:
            found = self.kept.get(path)
        if found is not None and found[0] == key:
            return found[1]
        try:
            config = run_config(read_yaml_record(path), path)
        except (OSError, UnreadableRecord) as err:
            problem = err.problem if isinstance(err, UnreadableRecord) else err.strerror or type(err).__name__
            log.warning("the attention tab reads %s within its limits: %s is unreadable (%s)", run_dir, path, problem)
            config = RunConfig()
        with self.lock:
            self.kept[path] = (key, config)
        return config
