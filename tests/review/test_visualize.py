"""scripts/visualize.py and attention_lab.review.maps on a tiny trained run (conftest's tiny_trained_run)."""

from __future__ import annotations

import json
import logging
import shlex
import shutil
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

from attention_lab.data.probe import EXAMPLE_TEXT
from attention_lab.errors import ReviewError
from attention_lab.plotting.grid import DPI, grid_figsize
from attention_lab.records.commands import script_command, visualize_command
from attention_lab.records.trained_run import find_run, load_module
from attention_lab.review.grid import grid_figure
from attention_lab.review.maps import compute_maps, prepare_words
from attention_lab.review.visualize import unique_stem, visualize
from conftest import ROOT, logger_states, run_in_process, run_script, script_env, unwritable_out

VISUALIZE = ROOT / "scripts" / "visualize.py"
TEXT = "Your journey starts with one big step"  # 'big' is not in the notebooks' vocabulary


@pytest.fixture(scope="module")
def module_and_files(tiny_trained_run):
    files = find_run(tiny_trained_run)
    module, step = load_module(files)
    return module, files, step


# ---------------------------------------------------------------------------------------------- CLI

def test_the_run_is_an_argument_and_the_text_an_option(tmp_path):
    """One grammar, argparse's, as compare.py takes its arguments; the key=value one of earlier versions is named
    in one line, and the command other messages print is one that parses."""
    command = visualize_command(tmp_path / "a run", "Hello there, world")
    assert command == f"{script_command('visualize.py')} '{tmp_path / 'a run'}' --text 'Hello there, world'"
    shown = shlex.split(visualize_command(tmp_path, EXAMPLE_TEXT))  # what the end-of-run note prints parses as the script's grammar
    assert shown[2:] == [str(tmp_path), "--text", "Your journey starts with one step"]
    for args, fragment in ((["run=a/b", "text=hello"], "give the run dir as it is and the sentence as --text"),
                           (["a/b", "--txt", "hello"], "unrecognized arguments"),
                           (["a/b", "c/d"], "unrecognized arguments")):
        proc = run_script(VISUALIZE, *args, timeout=60)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
        assert fragment in lines[0], lines[0]


WATCHED = ("torch", "lightning", "torchmetrics", "scipy")  # what a review script's process may not need


def visualize_process(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """scripts/visualize.py ``args`` as the command line runs it, in a process of its own (only a process shows
    what a script imports): its stdout ends with ``exit <status>`` and ``imported: [...]``, those of WATCHED it
    imported."""
    code = ("import runpy, sys\nsys.argv = sys.argv[1:]\n"
            "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
            "except SystemExit as e:\n    print('exit', e.code)\n"
            f"print('imported:', sorted(m for m in {WATCHED!r} if m in sys.modules))")
    return subprocess.run([sys.executable, "-c", code, str(VISUALIZE), *args], capture_output=True, text=True,
                          env=script_env(), cwd=ROOT, timeout=timeout)


def test_help_and_errors_are_fast_without_torch(tmp_path):
    """--help and a wrong run dir are answered before torch is imported."""
    for args in (["--help"], [str(tmp_path / "nowhere")]):
        proc = visualize_process(*args)
        assert "imported: []" in proc.stdout, proc.stdout + proc.stderr
    assert "does not exist" in proc.stderr


@pytest.mark.parametrize("case", ["no_checkpoint", "missing", "sweep", "no_run_key"])
def test_bad_run_fails_with_one_clear_line(tmp_path, case):
    run = tmp_path / "run"
    if case == "no_checkpoint":
        (run / ".hydra").mkdir(parents=True)
        (run / ".hydra" / "config.yaml").write_text("seed: 0\n")
    elif case == "sweep":
        (run / "0" / ".hydra").mkdir(parents=True)
        (run / "multirun.yaml").write_text("hydra: {}\n")
    args = ["--text", "hello"] if case == "no_run_key" else [str(run), "--text", "hello"]
    proc = run_script(VISUALIZE, *args, timeout=60)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    expected = {"no_checkpoint": "has no checkpoint", "missing": "does not exist", "sweep": "is a sweep directory",
                "no_run_key": "a run dir is required"}[case]
    assert expected in lines[0]


@pytest.fixture
def untrained_run(tmp_path):
    """A run dir whose checkpoint is not even a checkpoint: enough for errors that come before loading it."""
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "best.ckpt").write_bytes(b"not a checkpoint")
    return run


@pytest.mark.parametrize("case", ["existing_file", "under_a_file", "read_only_dir"])
def test_unwritable_out_fails_with_one_line(untrained_run, tmp_path, case):
    """--out is checked before the checkpoint is loaded: an unusable one is named, in one line."""
    out = unwritable_out(tmp_path, case, "maps")
    proc = run_script(VISUALIZE, str(untrained_run), "--text", "hello", "--out", str(out), timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1, proc.stderr
    assert lines[0].startswith(f"error: --out={out} "), lines[0]
    assert "Traceback" not in proc.stdout + proc.stderr
    assert (tmp_path / "blocker").read_text() == "not a directory\n"


class WritesMarker:
    """Unpickling this object calls open(marker, "w"): the code execution a tampered checkpoint could carry."""

    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def test_checkpoint_that_runs_code_is_refused(tmp_path, monkeypatch):
    import torch

    run, marker = tmp_path / "run", tmp_path / "code-ran"
    (run / "checkpoints").mkdir(parents=True)
    checkpoint = run / "checkpoints" / "best.ckpt"
    torch.save({"state_dict": {}, "global_step": WritesMarker(marker),
                "hyper_parameters": {"model": {"name": "self"}, "vocab": ["<pad>", "<unk>"]}}, checkpoint)

    with pytest.raises(ReviewError, match="could run code; refused"):
        load_module(find_run(run))
    assert not marker.exists()
    # Even where torch's default is to unpickle anything (an environment setting some users keep for old files).
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")  # torch reads it at each load
    proc = run_in_process(VISUALIZE, str(run), "--text", "hello", "--out", str(tmp_path / "o"))
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and "could run code; refused" in lines[0], proc.stderr
    assert not marker.exists()

    # The payload is real: the checkpoint's pickle calls open() (io.open; read here without unpickling it).
    import pickletools
    import zipfile

    with zipfile.ZipFile(checkpoint) as archive:
        pickled = archive.read(next(name for name in archive.namelist() if name.endswith("data.pkl")))
    assert "io open" in [arg for op, arg, _ in pickletools.genops(pickled) if op.name == "GLOBAL"]


# ---------------------------------------------------------------------------------------------- end to end

def test_visualize_script_writes_png_html_and_tensorboard(tiny_trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_trained_run, run)  # the shared run stays untouched
    proc = run_in_process(VISUALIZE, str(run), "--text", TEXT, "--tensorboard", check=True)
    assert "warning: words not in the vocabulary are mapped to <unk>: big" in proc.stderr

    pngs, htmls = sorted((run / "visualize").glob("*.png")), sorted((run / "visualize").glob("*.html"))
    assert len(pngs) == len(htmls) == 1 and pngs[0].stem == htmls[0].stem
    assert pngs[0].name.startswith("your-journey-starts-with-one-big-step-")

    # The grid: 2 layers x 4 heads of 7 words, at the size the layout asks for, with the layout in its metadata.
    words = ["Your", "journey", "starts", "with", "one", "<unk>", "step"]
    with Image.open(pngs[0]) as image:
        layout = json.loads(image.text["Description"])
        width, height = grid_figsize(2, 4, len(words), len(words), title_lines=len(layout["title"]))
        assert image.size == (round(width * DPI), round(height * DPI))
    assert layout["title"][0].startswith("input “Your journey starts with one <unk> step”")
    assert (layout["layers"], layout["heads"]) == (2, 4)
    assert layout["key_words"] == layout["query_words"] == words

    page = htmls[0].read_text()
    assert '"key_words": ["Your", "journey", "starts", "with", "one", "\\u003cunk\\u003e", "step"]' in page
    for external in ("<link", " src=", "@import", "url(", "https://"):  # everything inline: opens offline
        assert external not in page

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from attention_lab.records.files import tensorboard_dir

    events = EventAccumulator(str(tensorboard_dir(run)), size_guidance={"images": 0})
    events.Reload()
    tags = set(events.Tags()["images"])
    stem = pngs[0].stem
    assert f"visualize/{stem}/grid" in tags
    assert {f"visualize/{stem}/layer{layer}/head{head}" for layer in range(2) for head in range(4)} <= tags

    # Outputs never overwrite: the next name for the same text differs.
    assert unique_stem(run / "visualize", TEXT) != stem


def test_grid_figure_shows_every_layer_and_head(module_and_files):
    module, files, _ = module_and_files
    maps = compute_maps(module, "Your journey starts with one step")
    assert (maps.layers, maps.heads) == (2, 4)
    fig = grid_figure(maps)
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == [f"layer {i} · head {h}" for i in range(2) for h in range(4)]
    for ax in panels:
        assert [t.get_text() for t in ax.get_xticklabels()] == maps.words
        assert [t.get_text() for t in ax.get_yticklabels()] == maps.words
    # The maps are the model's own weights: rows are distributions.
    _, weights = module.predict_words([maps.words])
    np.testing.assert_allclose(maps.weights[1], weights[1][0].numpy(), atol=1e-6)
    np.testing.assert_allclose(maps.weights[0].sum(-1), 1.0, atol=1e-5)


def test_unknown_and_too_many_words(caplog):
    vocab = ["<pad>", "<unk>", "Your", "journey"]
    with caplog.at_level(logging.WARNING, logger="attention_lab"):
        words, unknown = prepare_words("your journey, friend", vocab, context_length=16)
    assert words == ["<unk>", "journey", "<unk>"] and unknown == ["your", "friend"]
    assert "your (did you mean Your?), friend" in caplog.text
    words, _ = prepare_words("Your journey " * 10, vocab, context_length=5)
    assert len(words) == 5 and "only the first 5" in caplog.text
    with pytest.raises(ReviewError, match="contains no words"):
        prepare_words(" ,.! ", vocab, context_length=5)


def test_the_model_metrics_json_describes_is_shown_by_default(tiny_trained_run):
    """last.ckpt, the end of training, is what metrics.json measured; best.ckpt is chosen by naming it."""
    files = find_run(tiny_trained_run)
    module, step = load_module(files)
    assert files.checkpoint.name == "last.ckpt"
    assert step == json.loads((tiny_trained_run / "metrics.json").read_text())["global_step"]
    assert find_run(tiny_trained_run / "checkpoints" / "best.ckpt").checkpoint.name == "best.ckpt"


def test_best_checkpoint_when_no_last(tiny_trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(tiny_trained_run, run, ignore=shutil.ignore_patterns("last.ckpt", "tensorboard"))
    files = find_run(run)
    assert files.checkpoint.name == "best.ckpt"  # visualize.py prints which checkpoint and step it shows
    assert files.config.task.name == "reverse"
    assert find_run(run / "checkpoints" / "best.ckpt").run_dir == run  # a .ckpt path works too


def test_cross_model_rows_are_output_positions():
    """Encoder-decoder models: the rows of a map are output positions, labelled with their prediction."""
    from attention_lab.config import BlockConfig, ModelConfig
    from attention_lab.lit_module import AttentionLitModule
    from attention_lab.review.html_view import render_html

    vocab = ["<pad>", "<unk>", "Life", "dessert", "eat", "first", "is", "short"]
    config = ModelConfig(name="cross", d_model=16, num_heads=1, layers=2, mask="padding", context_length=8,
                         block=BlockConfig(name="transformer"))
    module = AttentionLitModule(config, vocab)
    maps = compute_maps(module, "Life is short, eat dessert first")
    assert maps.encoder_decoder and (maps.layers, maps.heads) == (2, 1)
    assert maps.query_words == [f"out{i}→{p}" for i, p in enumerate(maps.predictions)]
    assert maps.words == ["Life", "is", "short", "eat", "dessert", "first"]
    fig = grid_figure(maps)
    assert fig.axes[0].get_ylabel() == "output position"
    assert '"query_axis": "output position"' in render_html(maps)


def test_out_dir_option(module_and_files, tmp_path):
    _, files, _ = module_and_files
    result = visualize(files.run_dir, "Life is short", out=tmp_path / "maps")
    assert result["png"].parent == tmp_path / "maps" and result["html"].is_file()
    assert not (files.run_dir / "visualize").exists()



def test_unwritable_out_with_a_trained_run(tiny_trained_run, tmp_path):
    blocker = tmp_path / "maps"
    blocker.write_text("a file")
    with pytest.raises(ReviewError, match=f"--out={blocker} is invalid: it is a file"):
        visualize(tiny_trained_run, "Life is short", out=blocker)
    proc = run_script(VISUALIZE, str(tiny_trained_run), "--text", "Life is short", "--out", str(blocker / "x"),
                      timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 1 and lines[0].startswith(f"error: --out={blocker / 'x'} ")


def test_description_names_the_run_settings(module_and_files):
    """The line under the maps' title: the model's settings (the checkpoint's hparams) and the task."""
    from omegaconf import OmegaConf

    from attention_lab.records.trained_run import describe_run

    module, files, _ = module_and_files
    cfg = OmegaConf.load(files.run_dir / ".hydra" / "config.yaml")
    line = describe_run(files, module)
    expected = (f"variant={cfg.model.name} heads={cfg.heads} d_model={cfg.d_model} layers={cfg.layers} "
                f"mask={cfg.mask} position={cfg.position} block={cfg.block.name} task={cfg.task.name}")
    assert expected in line and line.endswith(f"· {files.checkpoint.name}")


def test_the_head_view_opens_on_the_head_scoring_highest_on_the_tasks_kind(tmp_path):
    """As the attention tab opens: the task's kind (reverse) decides, from the final validation in metrics.json."""
    from omegaconf import OmegaConf

    from attention_lab.records.trained_run import RunFiles
    from attention_lab.review.html_view import render_html
    from attention_lab.review.visualize import opening_head

    metrics = {"head_score/reverse/layer0/head1": 0.4, "head_score/reverse/layer1/head2": 0.97,
               "head_score/reverse/layer1/head0": 0.95, "head_score/self/layer0/head0": 0.99,
               "head_score/reverse/layer1/head3": "not a number", "steps_to_solve": None}
    (tmp_path / "metrics.json").write_text(json.dumps(metrics))
    files = RunFiles(tmp_path, tmp_path / "last.ckpt", OmegaConf.create({"task": {"name": "reverse"}}))
    opening = opening_head(files)
    assert opening == {"kind": "reverse", "layer": 1, "head": 2, "score": 0.97}
    assert opening_head(RunFiles(tmp_path, tmp_path / "last.ckpt", None)) is None  # no config: no task, no kind
    maps = two_word_maps()
    page = render_html(maps, opening=opening)
    assert '"initial": {"layer": 1, "head": 2}' in page
    assert "Opens on layer 1, head 2: the head scoring highest on reverse (0.97)" in page
    assert '"initial": null' in render_html(maps) and '<p class="opening"></p>' in render_html(maps)


def two_word_maps():
    from attention_lab.review.attention_maps import AttentionMaps

    weights = [np.full((4, 2, 2), 0.5) for _ in range(2)]
    return AttentionMaps("a b", ["a", "b"], ["a", "b"], ["b", "a"], weights)


def test_visualize_opens_on_the_runs_best_reverse_head(tiny_trained_run, tmp_path):
    from attention_lab.analysis.tags import best_head, score_grid

    result = visualize(tiny_trained_run, "Life is short", out=tmp_path)
    grid = score_grid(json.loads((tiny_trained_run / "metrics.json").read_text()), "reverse")
    layer, head = best_head(grid)
    assert f'"initial": {{"layer": {layer}, "head": {head}}}' in result["html"].read_text()


def test_a_review_script_run_in_the_tests_process_leaves_its_loggers_as_they_were(tiny_trained_run, tmp_path):
    """The review scripts point the ``attention_lab`` logger at their own console (review/cli.py setup_logging): run
    in a test's process (conftest.run_in_process), they must not take a later run's log lines with them."""
    before = logger_states()
    run_in_process(VISUALIZE, str(tiny_trained_run), "--text", "hello", "--out", str(tmp_path / "o"), check=True)
    after = logger_states()
    assert {logger: after[logger] for logger in before} == before
    assert logging.getLogger("attention_lab").propagate and not logging.getLogger("attention_lab").handlers


def test_a_trained_model_is_read_with_torch_alone(tiny_trained_run, tmp_path):
    """visualize.py (and the attention tab, through the same load_module) reads a checkpoint without Lightning,
    whose import (torchmetrics, and with it SciPy) would be most of the process's start-up. A process of its own
    shows what the script imported."""
    proc = visualize_process(str(tiny_trained_run), "--text", TEXT, "--out", str(tmp_path), timeout=120)
    assert "exit 0\nimported: ['torch']\n" in proc.stdout, proc.stdout + proc.stderr[-3000:]
    assert list(tmp_path.glob("*.png")), "the maps were drawn"


def test_the_model_read_with_torch_alone_is_the_one_lightning_loads(module_and_files):
    """load_module's TrainedModel against Lightning's own load of the same checkpoint: the same weights bit for
    bit, and the same predictions and attention weights for a sentence."""
    import torch

    from attention_lab.lit_module import AttentionLitModule
    from attention_lab.model import TrainedModel

    module, files, _ = module_and_files
    reference = AttentionLitModule.load_from_checkpoint(files.checkpoint, map_location="cpu", weights_only=True)
    assert type(module) is TrainedModel and not module.training
    ours, theirs = module.model.state_dict(), reference.model.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[name], theirs[name]) for name in ours)
    assert module.vocab == reference.vocab and module.config == reference.config
    words = prepare_words(TEXT, module.vocab, module.config.context_length)[0]
    (predicted, weights), (expected, expected_weights) = module.predict_words([words]), reference.predict_words([words])
    assert predicted == expected
    assert all(torch.equal(w, e) for w, e in zip(weights, expected_weights, strict=True))


@pytest.mark.parametrize("change", ["cut", "dropped", "added"])
def test_a_checkpoint_whose_weights_do_not_fit_its_config_is_one_line(module_and_files, tmp_path, change):
    import torch

    module, files, _ = module_and_files
    checkpoint = torch.load(files.checkpoint, map_location="cpu", weights_only=True)
    weights, name = checkpoint["state_dict"], "model.token_embedding.weight"
    rows, width = module.model.token_embedding.weight.shape
    if change == "cut":
        weights[name] = weights[name][:3]
        expected = f"token_embedding.weight is 3x{width}, the model's is {rows}x{width}"
    elif change == "dropped":
        del weights[name]
        expected = "token_embedding.weight is missing"
    else:
        weights["model.extra.weight"] = weights[name]
        expected = "extra.weight is not the model's"
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    torch.save(checkpoint, run / "checkpoints" / "last.ckpt")
    with pytest.raises(ReviewError) as err:
        load_module(find_run(run))
    assert str(err.value) == (f"cannot load checkpoint {run / 'checkpoints' / 'last.ckpt'}: its weights do not fit its "
                              f"model config: {expected}")
