"""The ``TBPlugin`` behind TensorBoard's attention tab (entry point ``tensorboard_plugins`` in pyproject.toml).

Routes, under ``/data/plugin/attention_lab/``: the page's modules and style (all shipped in the package: the
tab works offline), ``runs``, ``maps?run=&step=``, ``scores?run=&step=`` (with the head to open on and the
redundant heads, :mod:`~attention_lab.tensorboard_plugin.focus`) and ``sentence?run=&text=``; the circuits
(:mod:`~attention_lab.tensorboard_plugin.circuit_views`, :mod:`~attention_lab.tensorboard_plugin.checkpoint_circuits`):
``circuits?run=&step=``, ``head_circuit?run=&layer=&head=&k=``, ``attribution?run=&text=`` and
``patch_pair?run=&clean=&corrupted=``; from the checkpoint, what the page offers to type
(:mod:`~attention_lab.tensorboard_plugin.examples`): ``vocabulary?run=`` and ``example_pair?run=&text=``. Every
response goes through TensorBoard's ``http_util.Respond`` (``X-Content-Type-Options: nosniff``); a request
that cannot be answered gets JSON ``{"error": "<one line>"}`` for the tab to print, never a traceback (an
unexpected failure too: its traceback goes to TensorBoard's log, the page gets one line).
"""

from __future__ import annotations

import logging
from pathlib import Path

from tensorboard import plugin_util
from tensorboard.backend import http_util
from tensorboard.plugins import base_plugin
from werkzeug import wrappers

from attention_lab.records.run_names import PLUGIN_NAME
from attention_lab.tensorboard_plugin.checkpoint_circuits import TOP_K, CheckpointCircuits
from attention_lab.tensorboard_plugin.circuit_views import circuit_views
from attention_lab.tensorboard_plugin.declared import DeclaredSizes
from attention_lab.tensorboard_plugin.examples import CheckpointExamples
from attention_lab.tensorboard_plugin.focus import annotate
from attention_lab.tensorboard_plugin.run_data import NoMaps, Source
from attention_lab.tensorboard_plugin.sentence import SentenceError, SentenceModels

log = logging.getLogger(__name__)

STATIC = Path(__file__).with_name("static")
# The head-view renderer is review/html_view.py's own file: one copy for the offline page and the tab.
HEAD_VIEW = Path(__file__).parents[1] / "review" / "static" / "head_view.js"
PAGE_FILES = {
    "/index.js": STATIC / "index.js",
    "/panel.js": STATIC / "panel.js",
    "/heatmaps.js": STATIC / "heatmaps.js",
    "/scores.js": STATIC / "scores.js",
    "/controls.js": STATIC / "controls.js",
    "/export.js": STATIC / "export.js",
    "/circuits.js": STATIC / "circuits.js",
    "/paths.js": STATIC / "paths.js",
    "/steps.js": STATIC / "steps.js",
    "/style.css": STATIC / "style.css",
    "/head_view.js": HEAD_VIEW,
}
CONTENT_TYPES = {".js": "text/javascript", ".css": "text/css"}


class BadRequest(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def step_argument(request) -> int | None:
    value = request.args.get("step")
    if value in (None, ""):
        return None
    try:
        return int(value)
    except ValueError:
        raise BadRequest(f"step={value!r} is not a whole number") from None


def whole_number(request, name: str) -> int:
    value = required(request, name)
    try:
        return int(value)
    except ValueError:
        raise BadRequest(f"{name}={value!r} is not a whole number") from None


def required(request, name: str) -> str:
    value = request.args.get(name)
    if value is None:
        raise BadRequest(f"the request names no {name}")
    return value


class AttentionPlugin(base_plugin.TBPlugin):
    plugin_name = PLUGIN_NAME

    def __init__(self, context: base_plugin.TBContext) -> None:
        self.data_provider = context.data_provider
        self.logdir = context.logdir or ""
        self.sentences = SentenceModels(self.logdir)
        self.declared = DeclaredSizes(self.logdir)
        self.circuits = CheckpointCircuits(self.sentences)
        self.examples = CheckpointExamples(self.sentences)

    def is_active(self) -> bool:
        # Listed with any logdir: runs without records get a message in the tab, not a missing tab.
        return True

    def frontend_metadata(self) -> base_plugin.FrontendMetadata:
        return base_plugin.FrontendMetadata(es_module_path="/index.js", tab_name="attention")

    def get_plugin_apps(self) -> dict:
        apps = {route: self.page_file(path) for route, path in PAGE_FILES.items()}
        apps.update({"/runs": self.serve_runs, "/maps": self.serve_maps, "/scores": self.serve_scores,
                     "/sentence": self.serve_sentence, "/circuits": self.serve_circuits,
                     "/head_circuit": self.serve_head_circuit, "/attribution": self.serve_attribution,
                     "/patch_pair": self.serve_patch_pair, "/vocabulary": self.serve_vocabulary,
                     "/example_pair": self.serve_example_pair})
        return apps

    @staticmethod
    def page_file(path: Path):
        @wrappers.Request.application
        def serve(request):
            return http_util.Respond(request, path.read_bytes(), CONTENT_TYPES[path.suffix] + "; charset=utf-8")

        return serve

    def source(self, request) -> Source:
        return Source(self.data_provider, plugin_util.context(request.environ),
                      plugin_util.experiment_id(request.environ), self.declared)

    @staticmethod
    def error(request, reason: str, status: int):
        return http_util.Respond(request, {"error": reason}, "application/json", code=status)

    def answer(self, request, compute):
        """``compute()``'s JSON, or the one-line reason it gives instead."""
        try:
            return http_util.Respond(request, compute(), "application/json")
        except BadRequest as err:
            return self.error(request, err.reason, 400)
        except NoMaps as err:
            return self.error(request, err.reason, 404)
        except SentenceError as err:
            return self.error(request, err.reason, err.status)
        except Exception:  # a bug or a record no check foresaw: the page still gets JSON it can print
            log.exception("the attention tab could not answer %s", request.full_path)
            return self.error(request, "the attention tab failed on this request; TensorBoard's log has the "
                                       "details", 500)

    def known_run(self, request) -> str:
        run = required(request, "run")
        if not self.source(request).known_run(run):
            raise NoMaps(f"no run named {run!r} in this TensorBoard")
        return run

    @wrappers.Request.application
    def serve_runs(self, request):
        self.sentences.warm_up()  # the page asks for the runs first: a sentence may follow
        return self.answer(request, lambda: {"runs": self.source(request).runs()})

    @wrappers.Request.application
    def serve_maps(self, request):
        return self.answer(request, lambda: self.source(request).maps(self.known_run(request), step_argument(request)))

    @wrappers.Request.application
    def serve_scores(self, request):
        def compute():
            step, run = step_argument(request), self.known_run(request)
            source = self.source(request)
            grids = source.scores(run, 2**62 if step is None else step)
            return annotate(grids, step, source.task_kind(run))

        return self.answer(request, compute)

    @wrappers.Request.application
    def serve_sentence(self, request):
        return self.answer(request, lambda: self.sentences.maps(self.known_run(request), required(request, "text")))

    @wrappers.Request.application
    def serve_circuits(self, request):
        return self.answer(request, lambda: circuit_views(self.source(request), self.known_run(request),
                                                          step_argument(request)))

    @wrappers.Request.application
    def serve_head_circuit(self, request):
        return self.answer(request, lambda: self.circuits.word_tables(
            self.known_run(request), whole_number(request, "layer"), whole_number(request, "head"),
            whole_number(request, "k") if "k" in request.args else TOP_K))

    @wrappers.Request.application
    def serve_attribution(self, request):
        return self.answer(request, lambda: self.circuits.attribution(self.known_run(request), required(request, "text")))

    @wrappers.Request.application
    def serve_patch_pair(self, request):
        return self.answer(request, lambda: self.circuits.patch_pair(
            self.known_run(request), required(request, "clean"), required(request, "corrupted")))

    @wrappers.Request.application
    def serve_vocabulary(self, request):
        return self.answer(request, lambda: self.examples.vocabulary(self.known_run(request)))

    @wrappers.Request.application
    def serve_example_pair(self, request):
        return self.answer(request, lambda: self.examples.example_pair(self.known_run(request), required(request, "text")))
