"""Any sentence through a run's checkpoint, for the tab's text box: the run's files are found from its
TensorBoard run name, the checkpoint is loaded as data (``weights_only=True``, as ``scripts/visualize.py``
loads it) and kept for the next sentence."""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from pathlib import Path

from attention_lab.review.cli import ReviewError

log = logging.getLogger(__name__)

MAX_CHARS = 2000  # longer text is cut before it is tokenized: the model reads at most context_length words
KEPT_MODELS = 4  # loaded checkpoints kept in memory (two runs side by side, and a little more)
DECIMALS = 4


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
    if path != root and root not in path.parents:
        raise SentenceError(f"run {run!r} is not inside the log directory", status=404)
    return next((folder.parent for folder in (path, *path.parents) if folder.name == "tensorboard"), path)


def import_model_code() -> None:
    """torch, Lightning and the model, imported for later requests; a failure waits for the request to say it."""
    try:
        import attention_lab.lit_module  # noqa: F401
    except ImportError as err:
        log.warning("the attention tab could not import %s: sentences will fail", err.name)


class SentenceModels:
    """Runs sentences through the checkpoints of the runs under ``logdir``; each loaded checkpoint is kept,
    keyed by its path, size and modification time (a checkpoint rewritten by training is loaded again)."""

    def __init__(self, logdir: str) -> None:
        self.logdir = logdir
        self.loaded: OrderedDict[tuple, tuple] = OrderedDict()  # key -> (module, step, files)
        self.lock = threading.Lock()
        self.warming: threading.Thread | None = None

    def warm_up(self) -> None:
        """Import torch and Lightning in the background, once: most of the first sentence's wait (seconds), paid
        while the page loads instead. TensorBoard itself needs neither, so this waits until the tab is opened."""
        if self.warming is None:
            self.warming = threading.Thread(target=import_model_code, name="attention-tab-warm-up", daemon=True)
            self.warming.start()

    def module_for(self, run: str):
        from attention_lab.review.maps import find_run, load_module

        try:
            files = find_run(run_dir_of(self.logdir, run))
            stat = files.checkpoint.stat()
        except ReviewError as err:
            raise SentenceError(str(err), status=404) from None
        except OSError as err:
            raise SentenceError(f"cannot read the checkpoint of run {run!r} ({err.strerror})", status=404) from None
        key = (str(files.checkpoint), stat.st_size, stat.st_mtime_ns)
        with self.lock:
            if key in self.loaded:
                self.loaded.move_to_end(key)
                return self.loaded[key]
            import torch

            # The models are tiny: with a thread per core, each small op waits on the others (spin-waits
            # on a busy machine); one thread answers a sentence several times sooner (29 ms against 243 ms).
            torch.set_num_threads(1)
            try:
                module, step = load_module(files)
            except ReviewError as err:
                raise SentenceError(str(err), status=422) from None
            self.loaded[key] = (module, step, files)
            while len(self.loaded) > KEPT_MODELS:
                self.loaded.popitem(last=False)
            return self.loaded[key]

    def maps(self, run: str, text: str) -> dict:
        """The sentence's maps through every layer and head of ``run``'s checkpoint, with notes on what was
        changed (cut, unknown words)."""
        from attention_lab.data.corpus import UNK, tokenize
        from attention_lab.review.maps import compute_maps

        notes = []
        if len(text) > MAX_CHARS:
            text = text[:MAX_CHARS]
            notes.append(f"only the first {MAX_CHARS} characters are read")
        module, step, files = self.module_for(run)
        context = module.config.context_length
        count = len(tokenize(text))
        try:
            maps = compute_maps(module, text)
        except ReviewError as err:
            raise SentenceError(str(err)) from None
        if count > context:
            notes.append(f"the sentence has {count} words; the model's context holds {context}, so only the first "
                         f"{context} are shown")
        if maps.unknown:
            notes.append(f"not in the vocabulary, shown as {UNK}: {', '.join(dict.fromkeys(maps.unknown))}")
        if maps.layers == 0 or maps.heads == 0:
            raise SentenceError("this run's model has no attention heads to show", status=422)
        return {"run": run, "text": text, "words": maps.words, "query_words": maps.query_words,
                "key_words": maps.words, "query_axis": maps.query_axis, "predictions": maps.predictions,
                "weights": [layer.round(DECIMALS).tolist() for layer in maps.weights], "notes": notes,
                "checkpoint": files.checkpoint.name, "step": step, "scale": maps.colour_scale().as_dict()}
