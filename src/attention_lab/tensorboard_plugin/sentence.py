"""Any sentence through a run's checkpoint, for the tab's text box: the run's files are found from its
TensorBoard run name, the checkpoint is loaded as data (``weights_only=True``, as ``scripts/visualize.py``
loads it) and kept for the next sentence."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from attention_lab.errors import ReviewError
from attention_lab.tensorboard_plugin.limits import MAX_HEADS, MAX_LAYERS, most_words, weights_for_page

log = logging.getLogger(__name__)

MAX_CHARS = 2000  # longer text is cut before it is tokenized: the model reads at most context_length words
KEPT_MODELS = 4  # loaded checkpoints kept in memory (two runs side by side, and a little more)
KEPT_FAILURES = 64  # checkpoints remembered as failed, so a bad one is not loaded again at every request


class SentenceError(Exception):
    """Why a sentence cannot be run (``reason``: the line the tab prints; ``status``: the HTTP status)."""

    def __init__(self, reason: str, status: int = 400) -> None:
        super().__init__(reason)
        self.reason, self.status = reason, status


def run_dir_of(logdir: str, run: str) -> Path:
    """The run dir holding TensorBoard run ``run``: ``<run dir>/tensorboard/<name>`` -> ``<run dir>``, also when
    ``logdir`` is a run's own ``tensorboard/<name>``. The run must lie inside ``logdir``."""
    if not logdir:
        raise SentenceError("the sentence box needs TensorBoard started with --logdir (not --logdir_spec)")
    root = Path(logdir).expanduser().resolve()
    path = (root / run).resolve()
    if not inside(root, path):
        raise SentenceError(f"run {run!r} is not inside the log directory", status=404)
    return next((folder.parent for folder in (path, *path.parents) if folder.name == "tensorboard"), path)


def inside(root: Path, path: Path) -> bool:
    """Whether the resolved ``path`` is ``root`` or lies under it."""
    return path == root or root in path.parents


def keep(kept: OrderedDict, key: tuple, value, bound: int) -> None:
    """Adds ``value`` as the newest of ``kept``, dropping the oldest beyond ``bound``."""
    kept[key] = value
    while len(kept) > bound:
        kept.popitem(last=False)


def import_model_code() -> None:
    """torch and the model imported, and a small model built on PyTorch's meta device, for later requests: each
    request checks its checkpoint's declared size there (attention_lab.records.model_bounds), and the first weights
    initialised on that device import the rest of torch. A failure waits for the request to say it."""
    try:
        from attention_lab.records.model_bounds import declared_numbers

        declared_numbers({"name": "self"}, 2)
    except ImportError as err:
        log.warning("the attention tab could not import %s: sentences will fail", err.name)
    except Exception as err:  # noqa: BLE001 - the warm-up only saves time; each request reports its own failure
        log.warning("the attention tab's warm-up failed (%s): sentences may fail and will say why",
                    type(err).__name__)


@dataclass
class Loaded:
    """A checkpoint loaded for sentences, and the lock that lets one sentence at a time through it: the weights
    are read at the module's hook points, which every request would otherwise share."""

    module: Any
    step: int
    files: Any
    lock: threading.Lock = field(default_factory=threading.Lock)


class SentenceModels:
    """Runs sentences through the checkpoints of the runs under ``logdir``; each loaded checkpoint is kept, and
    each one that failed to load is remembered with its reason, keyed by its path, size and modification time (a
    checkpoint rewritten by training is loaded again). A checkpoint is loaded under a lock of its own: a slow
    one keeps the other runs waiting for nothing."""

    def __init__(self, logdir: str) -> None:
        self.logdir = logdir
        self.loaded: OrderedDict[tuple, Loaded] = OrderedDict()
        self.failed: OrderedDict[tuple, SentenceError] = OrderedDict()
        self.loading: dict[str, threading.Lock] = {}  # checkpoint path -> the lock its loads take
        self.lock = threading.Lock()  # guards the three dicts above, never held while a checkpoint loads
        self.warming: threading.Thread | None = None

    def warm_up(self) -> None:
        """Import torch and the model in the background, once: most of the first sentence's wait, paid while the
        page loads instead. TensorBoard itself needs neither, so this waits until the tab is opened."""
        if self.warming is None:
            self.warming = threading.Thread(target=import_model_code, name="attention-tab-warm-up", daemon=True)
            self.warming.start()

    def files_of(self, run: str):
        """The run's files and the key of its checkpoint; the checkpoint and config must lie inside the logdir
        (a link out of it is refused as a run folder outside it is)."""
        from attention_lab.records.files import SAVED_CONFIG
        from attention_lab.records.trained_run import find_run

        run_dir = run_dir_of(self.logdir, run)
        root = Path(self.logdir).expanduser().resolve()
        try:
            if not inside(root, (run_dir / SAVED_CONFIG).resolve()):
                raise SentenceError(f"the config of run {run!r} is not inside the log directory", status=404)
            files = find_run(run_dir)
            if not inside(root, files.checkpoint.resolve()):
                raise SentenceError(f"the checkpoint of run {run!r} is not inside the log directory", status=404)
            stat = files.checkpoint.stat()
        except ReviewError as err:
            raise SentenceError(str(err), status=404) from None
        except OSError as err:
            raise SentenceError(f"cannot read the checkpoint of run {run!r} ({err.strerror})", status=404) from None
        return files, (str(files.checkpoint), stat.st_size, stat.st_mtime_ns)

    def kept(self, key: tuple) -> Loaded | None:
        """The loaded checkpoint of ``key``, None when not loaded yet; raises its failure when it failed."""
        with self.lock:
            if key in self.failed:
                failure = self.failed[key]
                raise SentenceError(failure.reason, failure.status)
            if key in self.loaded:
                self.loaded.move_to_end(key)
                return self.loaded[key]
            return None

    def module_for(self, run: str) -> Loaded:
        from attention_lab.records.trained_run import load_module

        files, key = self.files_of(run)
        found = self.kept(key)
        if found is not None:
            return found
        with self.lock:
            loading = self.loading.setdefault(key[0], threading.Lock())
        with loading:
            found = self.kept(key)  # loaded (or failed) while this request waited
            if found is not None:
                return found
            import torch

            # The models are tiny: with a thread per core, each small op waits on the others (they spin-wait
            # while other processes hold the cores); one thread answers a sentence sooner, as in training
            # (docs/benchmarks.md, "The attention tab's tensors").
            torch.set_num_threads(1)
            try:
                found = Loaded(*load_module(files), files)
            except ReviewError as err:
                reason = str(err)
            if found is None:
                # Kept and raised outside the handler, each a new error: neither holds a traceback, nor so the
                # frames of the failed load (the checkpoint it read, anything built of it).
                with self.lock:
                    keep(self.failed, key, SentenceError(reason, status=422), KEPT_FAILURES)
                raise SentenceError(reason, status=422)
            with self.lock:
                keep(self.loaded, key, found, KEPT_MODELS)
            return found

    def maps(self, run: str, text: str) -> dict:
        """The sentence's maps through every layer and head of ``run``'s checkpoint, with notes on what was
        changed (cut, unknown words)."""
        from attention_lab.data.corpus import UNK, tokenize
        from attention_lab.review.maps import compute_maps

        notes = []
        if len(text) > MAX_CHARS:
            text = text[:MAX_CHARS]
            notes.append(f"only the first {MAX_CHARS} characters are read")
        loaded = self.module_for(run)
        module = loaded.module
        context, layers, heads = module.config.context_length, module.config.layers, module.config.num_heads
        words = tokenize(text)
        most = most_words(layers, heads)
        if most == 0:
            raise SentenceError(f"this run's model has {layers} layers x {heads} heads; the attention tab shows at "
                                f"most {MAX_LAYERS} x {MAX_HEADS}", status=422)
        if min(len(words), context) > most:
            text = " ".join(words[:most])  # the same words again when tokenized: tokenize drops the rest
            notes.append(f"the sentence has {len(words)} words; for a model of {layers} layers x {heads} heads the "
                         f"tab shows the first {most}")
        elif len(words) > context:
            notes.append(f"the sentence has {len(words)} words; the model's context holds {context}, so only the "
                         f"first {context} are shown")
        try:
            with loaded.lock:
                maps = compute_maps(module, text)
        except ReviewError as err:
            raise SentenceError(str(err)) from None
        if maps.unknown:
            notes.append(f"not in the vocabulary, shown as {UNK}: {', '.join(dict.fromkeys(maps.unknown))}")
        if maps.layers == 0 or maps.heads == 0:
            raise SentenceError("this run's model has no attention heads to show", status=422)
        return {"run": run, "text": text, "words": maps.words, "query_words": maps.query_words,
                "key_words": maps.words, "query_axis": maps.query_axis, "predictions": maps.predictions,
                "weights": [weights_for_page(layer) for layer in maps.weights], "notes": notes,
                "checkpoint": loaded.files.checkpoint.name, "step": loaded.step, "scale": maps.colour_scale().as_dict()}
