"""The attention tab's routes, through TensorBoard's own WSGI app and werkzeug's test client (as TensorBoard's
plugin tests do), over event files written here and over the shared trained run."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT
from tab_runs import XSS, fake_weights, write_run

ROUTE = "/data/plugin/attention_lab"
WORDS = ["Life", "is", XSS, "<unk>"]


def client_for(logdir: Path):
    from tensorboard.backend import application
    from tensorboard.backend.event_processing import data_provider, plugin_event_multiplexer
    from tensorboard.plugins import base_plugin
    from werkzeug import test as werkzeug_test
    from werkzeug import wrappers

    from attention_lab.tensorboard_plugin.plugin import AttentionPlugin

    multiplexer = plugin_event_multiplexer.EventMultiplexer(tensor_size_guidance={"attention_lab": 0})
    multiplexer.AddRunsFromDirectory(str(logdir))
    multiplexer.Reload()
    context = base_plugin.TBContext(logdir=str(logdir),
                                    data_provider=data_provider.MultiplexerDataProvider(multiplexer, str(logdir)))
    return werkzeug_test.Client(application.TensorBoardWSGI([AttentionPlugin(context)]), wrappers.Response)


def get(client, route: str, **params):
    response = client.get(f"{ROUTE}/{route}", query_string=params)
    assert response.headers["X-Content-Type-Options"] == "nosniff", route
    return response


SCORES = {
    "head_score/induction/layer0/head0": [(50, 0.1), (100, 0.2)],
    "head_score/induction/layer1/head2": [(50, 0.7), (100, 0.9)],
    "ablation/zero/loss/layer0/head1": [(100, 0.25)],
    "ablation/zero/loss/layer1/all": [(100, 1.5)],
    "ablation/mean/token_acc/layer1/head0": [(100, float("nan"))],
    "attention_entropy/layer0/head0": [(50, 1.0)],  # not a per-head grid the tab shows
}


@pytest.fixture(scope="module")
def logdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tab_logdir")
    write_run(root / "new", steps=[0, 50, 100], words=WORDS, scalars=SCORES)
    write_run(root / "old", steps=[], words=WORDS, maps=False)
    return root


@pytest.fixture(scope="module")
def client(logdir):
    return client_for(logdir)


NEW, OLD = "new/tensorboard/version_0", "old/tensorboard/version_0"


def test_runs_say_which_have_maps(client):
    runs = get(client, "runs").get_json()["runs"]
    assert [(r["run"], r["has_maps"]) for r in runs] == [(NEW, True), (OLD, False)]
    assert runs[0]["message"] is None and "no attention records" in runs[1]["message"]


@pytest.mark.parametrize(("asked", "shown"), [(None, 100), ("100", 100), ("75", 50), ("0", 0), ("-5", 0)])
def test_maps_of_the_step_logged_at_or_before(client, asked, shown):
    written = fake_weights(shown, 2, 3, len(WORDS), len(WORDS))  # what write_run wrote at that step
    params = {"run": NEW} if asked is None else {"run": NEW, "step": asked}
    data = get(client, "maps", **params).get_json()
    assert data["steps"] == [0, 50, 100] and data["step"] == shown
    assert data["key_words"] == data["query_words"] == WORDS and data["query_axis"] == "query"
    assert np.allclose(np.asarray(data["weights"]), written, atol=1e-3)  # float16 on disk


def test_scores_and_ablation_grids_at_a_step(client):
    grids = {g["family"]: g for g in get(client, "scores", run=NEW, step="100").get_json()["grids"]}
    assert set(grids) == {"head_score/induction", "ablation/zero/loss", "ablation/mean/token_acc"}
    assert grids["head_score/induction"]["cells"] == [[pytest.approx(0.2), None, None],
                                                      [None, None, pytest.approx(0.9)]]
    loss = grids["ablation/zero/loss"]
    assert loss["cells"] == [[None, 0.25], [None, None]] and loss["whole_layer"] == [None, 1.5]
    assert grids["ablation/mean/token_acc"]["cells"] == [[None], [None]]  # NaN is shown as missing
    earlier = {g["family"]: g for g in get(client, "scores", run=NEW, step="60").get_json()["grids"]}
    assert set(earlier) == {"head_score/induction"} and earlier["head_score/induction"]["step"] == 50
    assert earlier["head_score/induction"]["cells"][1][2] == pytest.approx(0.7)
    assert get(client, "scores", run=NEW, step="10").get_json()["grids"] == []


def test_friendly_errors_never_a_traceback(client, caplog):
    cases = [(get(client, "maps", run=OLD), 404, "no attention records"),
             (get(client, "maps", run="nope"), 404, "no run named 'nope'"),
             (get(client, "maps"), 400, "names no run"),
             (get(client, "maps", run=NEW, step="ten"), 400, "step='ten' is not a whole number"),
             (get(client, "sentence", run=NEW, text="Life is short"), 404, "has no checkpoint"),
             (get(client, "sentence", run=NEW), 400, "names no text")]
    for response, status, reason in cases:
        assert response.status_code == status and reason in response.get_json()["error"]
        assert response.mimetype == "application/json"
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


@pytest.mark.parametrize(("logdir", "run", "expected"), [
    ("outputs", "runs/d/t/tensorboard/heads=3", "outputs/runs/d/t"),
    ("outputs", "multirun/d/t/2/tensorboard", "outputs/multirun/d/t/2"),
    ("outputs/runs/d/t/tensorboard/heads=3", ".", "outputs/runs/d/t"),  # TensorBoard over one run's events
    ("outputs", "some/dir", "outputs/some/dir"),
])
def test_run_dir_of_a_tensorboard_run(tmp_path, logdir, run, expected):
    from attention_lab.tensorboard_plugin.sentence import run_dir_of

    assert run_dir_of(str(tmp_path / logdir), run) == (tmp_path / expected).resolve()


def test_run_dir_outside_the_logdir_is_refused(tmp_path):
    from attention_lab.tensorboard_plugin.sentence import SentenceError, run_dir_of

    with pytest.raises(SentenceError) as refused:
        run_dir_of(str(tmp_path / "outputs"), "../elsewhere/tensorboard/x")
    assert refused.value.status == 404 and "not inside the log directory" in refused.value.reason
    with pytest.raises(SentenceError, match="needs TensorBoard started with --logdir"):
        run_dir_of("", "runs/x")


def test_page_files_are_shipped_and_the_renderer_shared(client):
    from attention_lab.review import html_view
    from attention_lab.tensorboard_plugin.plugin import PAGE_FILES

    for route, path in PAGE_FILES.items():
        response = get(client, route.lstrip("/"))
        assert response.status_code == 200 and response.get_data() == path.read_bytes()
        for external in ("https://", "http://cdn", "@import", "<link"):  # everything from this plugin
            assert external not in response.get_data(as_text=True)
    head_view = get(client, "head_view.js").get_data(as_text=True)
    assert PAGE_FILES["/head_view.js"] == html_view.HEAD_VIEW_JS  # one file ...
    assert "export function mountHeadView" in head_view
    index = get(client, "panel.js").get_data(as_text=True)
    assert 'from "./head_view.js"' in index  # ... that the tab imports and the offline page inlines
    assert "innerHTML" not in "".join(get(client, r.lstrip("/")).get_data(as_text=True) for r in PAGE_FILES)


@pytest.fixture(scope="module")
def trained_logdir(tiny_trained_run, tmp_path_factory) -> Path:
    """The shared trained run inside a logdir, beside a copy whose checkpoints are damaged or missing."""
    root = tmp_path_factory.mktemp("tab_trained")
    shutil.copytree(tiny_trained_run, root / "good")
    shutil.copytree(tiny_trained_run, root / "corrupt")
    for checkpoint in (root / "corrupt" / "checkpoints").glob("*.ckpt"):
        checkpoint.write_bytes(checkpoint.read_bytes()[:2000])
    shutil.copytree(tiny_trained_run, root / "missing", ignore=shutil.ignore_patterns("*.ckpt"))
    return root


def run_name(client, prefix: str) -> str:
    return next(r["run"] for r in get(client, "runs").get_json()["runs"] if r["run"].startswith(prefix))


def test_sentence_through_the_checkpoint(trained_logdir):
    from attention_lab.records.trained_run import find_run, load_module
    from attention_lab.review.maps import compute_maps

    client = client_for(trained_logdir)
    run = run_name(client, "good/")
    text = f"Your journey starts with {XSS} step"
    data = get(client, "sentence", run=run, text=text).get_json()
    module, _ = load_module(find_run(trained_logdir / "good"))
    expected = compute_maps(module, text)
    assert data["words"] == expected.words and "<unk>" in data["words"]
    assert np.allclose(np.asarray(data["weights"]), np.stack(expected.weights), atol=1e-4)
    assert data["checkpoint"] == "last.ckpt" and any("shown as <unk>: img, src" in n for n in data["notes"])

    long_text = " ".join(["Life"] * 40)
    data = get(client, "sentence", run=run, text=long_text).get_json()
    context = module.config.context_length
    assert len(data["words"]) == context and f"has 40 words; the model's context holds {context}" in data["notes"][0]


def test_a_failed_warm_up_is_one_warning_and_leaves_the_requests_to_say_why(monkeypatch, caplog):
    """The warm-up builds a model as well as importing: a failure there is a line in TensorBoard's log, not a
    thread's traceback."""
    import attention_lab.records.model_bounds as model_bounds
    from attention_lab.tensorboard_plugin.sentence import import_model_code

    def fail(model: dict, vocab_size: int) -> int:
        raise RuntimeError("no meta device")

    monkeypatch.setattr(model_bounds, "declared_numbers", fail)
    with caplog.at_level("WARNING", logger="attention_lab.tensorboard_plugin.sentence"):
        import_model_code()
    assert [r.getMessage() for r in caplog.records] == [
        "the attention tab's warm-up failed (RuntimeError): sentences may fail and will say why"]


def test_sentence_with_a_corrupt_or_missing_checkpoint(trained_logdir, caplog):
    client = client_for(trained_logdir)
    corrupt = get(client, "sentence", run=run_name(client, "corrupt/"), text="Life is short")
    assert corrupt.status_code == 422 and "cannot load checkpoint" in corrupt.get_json()["error"]
    missing = get(client, "sentence", run=run_name(client, "missing/"), text="Life is short")
    assert missing.status_code == 404 and "has no checkpoint" in missing.get_json()["error"]
    assert not [r for r in caplog.records if r.exc_info], "a traceback was logged"


@pytest.mark.parametrize("variant", ["multihead", "cross"])
def test_the_callback_records_the_modules_attention(tmp_path, variant):
    """What the training run writes is the module's own attention on the probe, at every n-th step and at the
    end (float16 on disk); an encoder-decoder model's rows are its output positions."""
    import lightning as L
    import torch
    from lightning.pytorch.loggers import TensorBoardLogger
    from torch.utils.data import DataLoader, TensorDataset

    from attention_lab.callbacks.probe_logging import ProbeLogger
    from attention_lab.config import BlockConfig, ModelConfig
    from attention_lab.lit_module import AttentionLitModule
    from attention_lab.review.maps import compute_maps

    vocab = ["<pad>", "<unk>", "Life", "dessert", "eat", "first", "is", "short"]
    cross = variant == "cross"
    config = ModelConfig(name=variant, d_model=16, num_heads=1 if cross else 2, layers=2,
                         mask="padding" if cross else "none", context_length=8, block=BlockConfig(name="transformer"))
    torch.manual_seed(0)
    module = AttentionLitModule(config, vocab)
    tokens = torch.randint(2, len(vocab), (16, 6))
    probe = f"Life is short, eat {XSS} first"
    trainer = L.Trainer(max_steps=5, logger=TensorBoardLogger(tmp_path, name="tb", version=""), accelerator="cpu",
                        callbacks=[ProbeLogger(probe=probe, every_n_steps=2, images=False)],
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        limit_val_batches=0)
    trainer.fit(module, DataLoader(TensorDataset(tokens, tokens), batch_size=4))
    data = get(client_for(tmp_path), "maps", run="tb").get_json()
    assert data["steps"] == [2, 4, 5]
    expected = compute_maps(module, probe)  # the weights after the last step
    assert data["key_words"] == expected.words == ["Life", "is", "short", "eat", *["<unk>"] * 4]
    assert data["query_words"] == ([f"out{i}" for i in range(8)] if cross else expected.words)
    assert data["query_axis"] == ("output position" if cross else "query")
    assert np.allclose(np.asarray(data["weights"]), np.stack(expected.weights), atol=2e-3)


def test_the_cost_script_counts_the_tabs_bytes(tmp_path):
    """scripts/benchmarks/attention_tab.py: the bytes of the tab's records, apart from everything else."""
    from attention_lab.records.probe_summary import WordLayout, probe_summary
    from test_benchmark import harness

    write_run(tmp_path / "run", steps=[0, 50], words=WORDS, scalars=SCORES)
    found = harness("attention_tab").event_bytes(tmp_path / "run")
    size, steps = found["tab tensors"]
    assert steps == {0, 50} and "PNG maps attention/*" not in found and found["other"][0] > 0
    summaries = sum(len(probe_summary(fake_weights(step, 2, 3, len(WORDS), len(WORDS)), WordLayout(WORDS, WORDS))
                        .SerializeToString()) for step in (0, 50))
    assert summaries < size < summaries + 2 * 64  # each record: its summary, the step and time, the framing


# ---------------------------------------------------------------------------------------------- the first view

def write_config(run_dir: Path, task: dict) -> None:
    """The run's saved config, as Hydra saves it (only the task: what the tab reads)."""
    from omegaconf import OmegaConf

    from attention_lab.records.files import SAVED_CONFIG

    (run_dir / SAVED_CONFIG).parent.mkdir(parents=True, exist_ok=True)
    OmegaConf.save(OmegaConf.create({"task": task}), run_dir / SAVED_CONFIG)


def test_runs_newest_first_named_by_their_overrides(tmp_path):
    """The tab opens on the first run with maps the runs route lists: the newest, not the first by name."""
    write_run(tmp_path / "runs/d/10-00", steps=[0], words=WORDS, name="heads=3")  # older, first by name
    write_run(tmp_path / "runs/d/11-00", steps=[0], words=WORDS, name="")  # newer: no overrides
    write_run(tmp_path / "multirun/d/12-00/2", steps=[], words=WORDS, maps=False, name="heads=4,seed=1")
    runs = get(client_for(tmp_path), "runs").get_json()["runs"]
    assert [(r["run"], r["label"], r["has_maps"]) for r in runs] == [
        ("runs/d/11-00/tensorboard", "default settings · runs/d/11-00", True),
        ("runs/d/10-00/tensorboard/heads=3", "heads=3 · runs/d/10-00", True),
        ("multirun/d/12-00/2/tensorboard/heads=4,seed=1", "heads=4,seed=1 · multirun/d/12-00/2", False)]
    assert runs[0]["start_time"] > runs[1]["start_time"]


@pytest.mark.parametrize(("run", "label"), [("runs/d/t/tensorboard/model=cross,heads=2", "model=cross,heads=2 · runs/d/t"),
                                            ("tensorboard/heads=3", "heads=3"), (".", "."), ("some/dir", "some/dir")])
def test_run_label(run, label):
    from attention_lab.records.run_names import run_label

    assert run_label(run) == label


# Lightning logs the validation after n steps at n - 1; the maps of that model are recorded at n.
REVERSE_RUN = {
    **{f"head_score/reverse/layer{layer}/head{head}": [(99, 0.1 + 0.1 * head), (199, 0.3 if layer == 0 else 0.9 + 0.02 * head)]
       for layer in range(2) for head in range(3)},
    "head_score/self/layer0/head0": [(99, 0.99), (199, 0.99)],  # higher, but not the task's kind
    **{f"ablation/zero/token_acc/layer1/head{head}": [(200, [0.002, -0.0001, 0.3][head])] for head in range(3)},
    **{f"ablation/zero/token_acc/layer0/head{head}": [(200, 0.2)] for head in range(3)},
    "ablation/zero/token_acc/layer1/all": [(200, 0.8)],
}


@pytest.fixture(scope="module")
def reverse_logdir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("reverse_logdir")
    write_run(root / "reverse", steps=[100, 200], words=WORDS, scalars=REVERSE_RUN, name="")
    write_config(root / "reverse", {"name": "reverse", "min_len": 3})
    write_run(root / "unknown", steps=[100], words=WORDS, scalars=REVERSE_RUN, name="")  # no saved config
    return root


def test_scores_carry_the_maps_step_and_the_head_to_open_on(reverse_logdir):
    client = client_for(reverse_logdir)
    at_100 = get(client, "scores", run="reverse/tensorboard", step="100").get_json()
    grid = next(g for g in at_100["grids"] if g["family"] == "head_score/reverse")
    assert (grid["step"], grid["logged_step"]) == (100, 99)  # beside the maps of step 100, as step 100
    assert at_100["focus"] == {"kind": "reverse", "layer": 0, "head": 2, "score": pytest.approx(0.3)}
    at_200 = get(client, "scores", run="reverse/tensorboard", step="200").get_json()
    assert {g["family"]: (g["step"], g["logged_step"]) for g in at_200["grids"]} == {
        "head_score/reverse": (200, 199), "head_score/self": (200, 199), "ablation/zero/token_acc": (200, 200)}
    assert at_200["focus"] == {"kind": "reverse", "layer": 1, "head": 2, "score": pytest.approx(0.94)}
    # the task's kind decides, not the highest score of any kind; without the run's config, no head is pointed at
    assert get(client, "scores", run="unknown/tensorboard", step="100").get_json()["focus"] is None


def test_redundant_heads_are_named_with_the_docs_section(reverse_logdir):
    """Heads 0 and 1 of layer 1 score high on reverse yet cost nothing when removed; head 2 costs 0.3: needed."""
    client = client_for(reverse_logdir)
    reply = get(client, "scores", run="reverse/tensorboard", step="200").get_json()
    assert [(h["layer"], h["head"]) for h in reply["redundant"]] == [(1, 0), (1, 1)]
    assert reply["redundancy"] == ("Scores and ablations disagree: layer 1 heads 0, 1 score 0.90–0.92 on reverse and "
                                   "look essential, yet removing any one alone costs at most 0.002 of token accuracy "
                                   "(removing the whole layer: 0.800): other heads do the same work.")
    assert reply["redundancy_docs"] == "docs/tensorboard.md#redundant-heads"
    # the "Why?" says what the docs section says first (an offline snapshot links to no docs page)
    section = (ROOT / "docs" / "tensorboard.md").read_text().split("### Redundant heads", 1)[1].replace("*", "")
    first = reply["redundancy_why"].split(". ")[0]
    assert first.startswith("A head score says what a head looks like") and " ".join(section.split()).startswith(first)
    earlier = get(client, "scores", run="reverse/tensorboard", step="100").get_json()  # no ablation yet: no line
    assert earlier["redundant"] == [] and earlier["redundancy"] is None


def test_a_value_that_rounds_to_zero_prints_as_zero():
    from attention_lab.tensorboard_plugin.focus import plain, redundancy_line

    assert [plain(v, 3) for v in (-0.0001, 0.0, -0.0, 0.0004, 0.0005, -0.25)] == ["0", "0", "0", "0", "0.001", "-0.250"]
    line = redundancy_line([{"layer": 1, "head": 0, "score": 0.9, "drop": -0.0001, "layer_drop": None}], "reverse")
    assert "costs at most 0 of token accuracy:" in line and "-0.000" not in line


def test_every_tasks_kind_is_a_head_score_kind():
    from omegaconf import OmegaConf

    from attention_lab.analysis.head_scores import HEAD_SCORE_KINDS
    from attention_lab.data.tasks import TASK_REGISTRY, task_head_score_kind

    kinds = {name: task_head_score_kind(OmegaConf.create({"name": name})) for name in TASK_REGISTRY}
    assert {kind for kind in kinds.values() if kind is not None} <= set(HEAD_SCORE_KINDS)
    assert kinds["reverse"] == "reverse" and kinds["induction"] == kinds["recall"] == "induction"
    assert kinds["copy"] == "self"  # task.options.delay=0, its default
    assert task_head_score_kind(OmegaConf.create({"name": "copy", "options": {"delay": 1}})) == "previous_token"
    assert task_head_score_kind({"name": "nope"}) is None and task_head_score_kind(None) is None


def test_best_head_skips_missing_cells():
    from attention_lab.analysis.tags import best_head

    assert best_head([[0.2, None], [float("nan"), 0.7], [0.7, 0.1]]) == (1, 1)  # the first on a tie
    assert best_head([[None, float("nan")]]) is None
