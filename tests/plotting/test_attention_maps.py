"""The TensorBoard heatmaps: one reused figure per word layout draws what a fresh attention_figure draws,
with the words on the axes, and the callback's images and predictions land in the event file."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from matplotlib.backends.backend_agg import FigureCanvasAgg
from PIL import Image
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch.utils.data import TensorDataset

from attention_lab.callbacks.probe_logging import ProbeLogger
from attention_lab.plotting.heatmaps import HeatmapFigure, attention_figure, run_title

PROBE = ["Life", "is", "short", "eat", "dessert", "first"]
LAYOUTS = {
    "self": (PROBE, PROBE),
    "encoder-decoder": ([f"out{i}" for i in range(4)], ["Your", "journey", "starts", "with", "one", "step"]),
    "too many cells to annotate": ([f"w{i}" for i in range(12)],) * 2,
}


def fresh_image(weights, query_words, key_words, title) -> np.ndarray:
    canvas = FigureCanvasAgg(attention_figure(weights, query_words, key_words, title))
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].copy()


def assert_same_picture(image: np.ndarray, expected: np.ndarray) -> None:
    """Pixel for pixel (a difference of 2 levels allowed: anti-aliasing at another DPI may round apart)."""
    assert image.shape == expected.shape
    assert np.abs(image.astype(int) - expected).max() <= 2


def random_maps(rng, n_q: int, n_k: int, count: int) -> list[np.ndarray]:
    return [rng.dirichlet(np.ones(n_k) * 0.3, size=n_q).astype(np.float32) for _ in range(count)]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_reused_figure_draws_what_a_fresh_figure_draws(layout):
    query_words, key_words = LAYOUTS[layout]
    rng = np.random.default_rng(0)
    figure = HeatmapFigure(query_words, key_words, "layer 0, head 0 · step 0")
    first, second = random_maps(rng, len(query_words), len(key_words), 2)
    image = figure.render(first, "layer 1, head 3 · step 400").copy()
    assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
    other = figure.render(second, "layer 0, head 1 · step 1200").copy()
    assert not np.array_equal(image, other)  # the cells, weights and title changed
    assert_same_picture(other, fresh_image(second, query_words, key_words, "layer 0, head 1 · step 1200"))
    # Drawn over the previous map, nothing of it is left.
    assert np.array_equal(figure.render(first, "layer 1, head 3 · step 400"), image)
    assert_same_picture(image, fresh_image(first, query_words, key_words, "layer 1, head 3 · step 400"))


def test_cells_follow_the_weights():
    """Independent of matplotlib's own drawing: the colour at each cell's centre is viridis of its weight,
    and the weights (as text) are drawn in the cells."""
    from matplotlib import colormaps

    weights = np.full((6, 6), 0.1)
    weights[2, 4] = 0.9
    figure = HeatmapFigure(PROBE, PROBE, "a title")
    image = figure.render(weights, "a title").copy()
    ax = figure.figure.axes[0]
    height = image.shape[0]
    x, y = ax.transData.transform((4, 2.35))  # below the text in cell (query 2, key 4)
    expected = np.round(np.array(colormaps["viridis"](0.9)[:3]) * 255)
    assert np.abs(image[round(height - y), round(x)].astype(int) - expected).max() <= 2
    x, y = ax.transData.transform((1, 0.35))
    expected = np.round(np.array(colormaps["viridis"](0.1)[:3]) * 255)
    assert np.abs(image[round(height - y), round(x)].astype(int) - expected).max() <= 2
    # The annotation of (2, 4) is dark text (bright cell), the others light; an empty cell has no text.
    labelled = figure.render(weights, "a title").copy()
    blank = HeatmapFigure(PROBE, PROBE, "a title")
    blank.labels.set_visible(False)
    unlabelled = blank.render(weights, "a title")
    x0, y0 = ax.transData.transform((3.5, 1.5))
    x1, y1 = ax.transData.transform((4.5, 2.5))
    cell = (slice(round(height - y0), round(height - y1)), slice(round(x0), round(x1)))
    differs = np.abs(labelled[cell].astype(int) - unlabelled[cell]).max(axis=-1) > 60
    assert 10 < differs.sum() < 0.3 * differs.size
    assert labelled[cell][differs].mean() < unlabelled[cell][differs].mean()  # darker: black text


def test_words_are_the_tick_labels():
    query_words, key_words = LAYOUTS["encoder-decoder"]
    weights = np.random.default_rng(1).dirichlet(np.ones(6), size=4)
    weights[1] = [0.05, 0.05, 0.8, 0.0, 0.1, 0.0]
    ax = attention_figure(weights, query_words, key_words, "t").axes[0]
    assert [label.get_text() for label in ax.get_xticklabels()] == key_words
    assert [label.get_text() for label in ax.get_yticklabels()] == query_words
    assert ax.get_title() == "t"
    labels = ax.collections[0]
    assert len(labels.get_paths()) == 4 * 6
    dark = [tuple(color) == (0, 0, 0, 1) for color in labels.get_facecolors()]
    assert dark == [w > 0.6 for w in weights.ravel()] and sum(dark) >= 1
    assert len(attention_figure(np.zeros((12, 12)), *LAYOUTS["too many cells to annotate"]).axes[0].collections) == 0


def test_a_title_too_wide_for_the_figure_gets_a_new_figure():
    logger = ProbeLogger()
    maps = [("attention/layer0/head0", "short", np.ones((1, 1)))]
    logger.write_maps(maps, ["Hi"], ["Hi"])
    figure = logger.figures[("Hi",), ("Hi",)]
    long_title = "layer 11, head 15 · step 1234567890"
    assert not figure.fits(long_title)
    [summary] = logger.write_maps([("attention/layer0/head0", long_title, np.ones((1, 1)))], ["Hi"], ["Hi"])
    assert logger.figures[("Hi",), ("Hi",)] is not figure
    assert summary.value[0].tag == "attention/layer0/head0"
    image = decoded(summary.value[0].image)
    assert_same_picture(image, fresh_image(np.ones((1, 1)), ["Hi"], ["Hi"], long_title))
    assert image.shape[1] > figure.render(np.ones((1, 1)), "short").shape[1]


# ------------------------------------------------------------------------------------------ the callback

VOCAB = ["<pad>", "<unk>", "Life", "dessert", "eat", "first", "is", "short"]


class FakeModule:
    """What the callback reads of an AttentionLitModule: vocab, config.context_length,
    model.encoder_decoder and predict_words (fixed, known attention weights)."""

    def __init__(self, encoder_decoder: bool, layers: int = 2, heads: int = 4) -> None:
        self.vocab = VOCAB
        self.config = SimpleNamespace(context_length=8, mixers=None)
        self.model = SimpleNamespace(encoder_decoder=encoder_decoder, blocks=[])  # no layer kinds: the 0–1 scale
        self.layers, self.heads = layers, heads

    def weights(self, layer: int, n: int) -> torch.Tensor:
        generator = torch.Generator().manual_seed(layer * 100 + n)
        return torch.softmax(torch.randn(1, self.heads, n, n, generator=generator) * 3, dim=-1)

    def predict_words(self, samples: list[list[str]]):
        predictions = [list(reversed(words)) if i else words for i, words in enumerate(samples)]
        return predictions, [self.weights(layer, len(samples[0])) for layer in range(self.layers)]


def fake_trainer(tmp_path, step: int):
    from lightning.pytorch.loggers import TensorBoardLogger

    ids = {w: i for i, w in enumerate(VOCAB)}
    inputs = torch.tensor([[ids["Life"], ids["is"], ids["short"], 0], [ids["eat"], ids["dessert"], ids["first"], 0]])
    datamodule = SimpleNamespace(val_set=TensorDataset(inputs, inputs.flip(1).roll(-1, 1)))
    logger = TensorBoardLogger(save_dir=str(tmp_path), name="", version="")
    return SimpleNamespace(loggers=[logger], global_step=step, datamodule=datamodule)


def read_events(logger) -> EventAccumulator:
    logger.experiment.flush()
    events = EventAccumulator(logger.log_dir, size_guidance={"images": 0, "tensors": 0})
    events.Reload()
    return events


def decoded(event) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(event.encoded_image_string)).convert("RGB"))


@pytest.mark.parametrize("encoder_decoder", [False, True])
def test_callback_logs_heatmaps_and_predictions_to_tensorboard(tmp_path, encoder_decoder):
    module = FakeModule(encoder_decoder)
    callback = ProbeLogger(probe="Life is short, eat dessert first!", every_n_steps=100, num_predictions=2,
                                  run_name="model=multihead,heads=4", image_every_n_steps=100)
    trainer = fake_trainer(tmp_path, step=150)
    callback.setup(trainer, module, "fit")
    callback.on_train_batch_end(trainer, module, None, None, 0)  # step 150: not a logging step
    trainer.global_step = 200
    callback.on_train_batch_end(trainer, module, None, None, 0)
    trainer.global_step = 250
    callback.on_train_end(trainer, module)
    callback.on_train_end(trainer, module)  # the same step again: logged once
    callback.wait()  # the final images are drawn on the worker thread
    events = read_events(trainer.loggers[0])

    tags = {f"attention/layer{layer}/head{head}" for layer in range(2) for head in range(4)}
    assert set(events.Tags()["images"]) == tags
    query_words = [f"out{i}" for i in range(6)] if encoder_decoder else PROBE
    for layer in range(2):
        weights = module.weights(layer, 6)[0].numpy()
        for head in range(4):
            logged = events.Images(f"attention/layer{layer}/head{head}")
            assert [image.step for image in logged] == [200, 250]
            # The title names the run: "model=multihead,heads=4", then "layer 1, head 2 · step 250".
            title = run_title("model=multihead,heads=4", f"layer {layer}, head {head} · step 250")
            assert title.splitlines() == ["model=multihead,heads=4", f"layer {layer}, head {head} · step 250"]
            expected = fresh_image(weights[head], query_words, PROBE, title)
            assert (logged[-1].height, logged[-1].width) == expected.shape[:2]
            assert_same_picture(decoded(logged[-1]), expected)

    texts = events.Tensors("predictions/text_summary")
    assert [text.step for text in texts] == [200, 250]
    table = texts[-1].tensor_proto.string_val[0].decode()
    assert "| Life is short | short is Life | Life is short | ✗ |" in table
    assert "| eat dessert first | first dessert eat | first dessert eat | ✓ |" in table


def test_callback_shortens_a_long_probe_and_logs_nothing_without_tensorboard(tmp_path, caplog):
    module = FakeModule(encoder_decoder=False, layers=1, heads=1)
    module.config.context_length = 3
    callback = ProbeLogger(probe="Life is short, eat dessert first", every_n_steps=10, image_every_n_steps=10)
    trainer = fake_trainer(tmp_path, step=10)
    with caplog.at_level("WARNING"):
        callback.setup(trainer, module, "fit")
    assert callback.probe_words == ["Life", "is", "short"]
    assert "only the first 3" in caplog.text
    callback.on_train_batch_end(trainer, module, None, None, 0)
    callback.wait()  # the worker thread writes the images
    image = read_events(trainer.loggers[0]).Images("attention/layer0/head0")[-1]
    assert_same_picture(decoded(image), fresh_image(module.weights(0, 3)[0, 0].numpy(), PROBE[:3], PROBE[:3],
                                                    "defaults\nlayer 0, head 0 · step 10"))
    trainer.loggers = []
    trainer.global_step = 20
    callback.on_train_batch_end(trainer, module, None, None, 0)  # no TensorBoard logger: nothing to do
    assert callback.last_logged_step == 10


@pytest.mark.parametrize("model", ["multihead", "cross"])
def test_the_configured_callback_with_a_real_module(tmp_path, model):
    """configs/callbacks/default.yaml's logger on a real AttentionLitModule: the maps are its weights."""
    from hydra.utils import instantiate
    from omegaconf import OmegaConf

    from attention_lab.lit_module import AttentionLitModule
    from conftest import compose_config

    cfg = compose_config([f"model={model}", "d_model=16", "layers=2"])
    callback = instantiate(cfg.callbacks.attention_maps)
    assert isinstance(callback, ProbeLogger) and callback.probe_words == PROBE
    module = AttentionLitModule(OmegaConf.to_container(cfg.model, resolve=True, enum_to_str=True), VOCAB)
    step = 10 * callback.every_n_steps
    trainer = fake_trainer(tmp_path, step=step)
    callback.setup(trainer, module, "fit")
    callback.on_train_batch_end(trainer, module, None, None, 0)  # the first doubling: the predictions only
    callback.wait()
    assert read_events(trainer.loggers[0]).Tags()["images"] == []
    callback.on_train_end(trainer, module)  # the end of training, at the same step: its images
    callback.wait()
    events = read_events(trainer.loggers[0])
    assert [text.step for text in events.Tensors("predictions/text_summary")] == [step]
    _, weights = module.predict_words([PROBE])
    heads = module.config.num_heads
    assert set(events.Tags()["images"]) == {f"attention/layer{layer}/head{head}"
                                           for layer in range(2) for head in range(heads)}
    query_words = [f"out{i}" for i in range(6)] if model == "cross" else PROBE
    for layer in range(2):
        for head in range(heads):
            logged = events.Images(f"attention/layer{layer}/head{head}")
            assert [image.step for image in logged] == [step]
            expected = fresh_image(weights[layer][0, head].numpy(), query_words, PROBE,
                                   f"defaults\nlayer {layer}, head {head} · step {step}")
            assert_same_picture(decoded(logged[-1]), expected)
    table = events.Tensors("predictions/text_summary")[-1].tensor_proto.string_val[0].decode()
    assert table.startswith("| input | target | prediction | ok |") and "| Life is short | short is Life |" in table


def test_by_default_images_only_of_the_final_model_and_predictions_once_per_doubling(tmp_path):
    module = FakeModule(encoder_decoder=False, layers=1, heads=2)
    callback = ProbeLogger(probe="Life is short", every_n_steps=10, num_predictions=1)
    trainer = fake_trainer(tmp_path, step=10)
    callback.setup(trainer, module, "fit")
    for step in (10, 100, 150, 200, 300, 400, 430):  # the predictions: once per doubling (100, 200, 400)
        trainer.global_step = step
        callback.on_train_batch_end(trainer, module, None, None, 0)
    callback.on_train_end(trainer, module)  # step 430
    callback.on_train_end(trainer, module)  # again: nothing new
    callback.wait()
    events = read_events(trainer.loggers[0])
    assert set(events.Tags()["images"]) == {"attention/layer0/head0", "attention/layer0/head1"}
    assert [image.step for image in events.Images("attention/layer0/head1")] == [430]
    assert [text.step for text in events.Tensors("predictions/text_summary")] == [100, 200, 400, 430]


class GatedLogger(ProbeLogger):
    """Its worker draws only once ``gate`` is set: what waits for the drawing, and what does not, can be seen."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.gate = threading.Event()

    def write_maps(self, *args, **kwargs) -> list:
        self.gate.wait(timeout=60)
        return super().write_maps(*args, **kwargs)


def test_the_final_images_are_drawn_during_the_final_validation_which_waits_for_them(tmp_path):
    module = FakeModule(encoder_decoder=False, layers=1, heads=2)
    callback = GatedLogger(probe="Life is short", every_n_steps=10, num_predictions=1)
    trainer = fake_trainer(tmp_path, step=23)
    callback.setup(trainer, module, "fit")
    callback.on_train_end(trainer, module)
    callback.teardown(trainer, module, "fit")  # the end of fit does not wait for the drawing
    assert [future.done() for future in callback.pending] == [False]
    trainer.loggers[0].finalize("success")  # as Lightning does after fit: the logger's writer is closed
    callback.gate.set()
    trainer.state = SimpleNamespace(fn="validate")
    callback.on_validation_end(trainer, module)  # train.py's final validation: waits at its end
    assert callback.pending == []
    assert [image.step for image in read_events(trainer.loggers[0]).Images("attention/layer0/head1")] == [23]
    callback.teardown(trainer, module, "validate")
    assert callback.worker is None and callback.events is None
    assert [p.name.endswith(".maps") for p in Path(trainer.loggers[0].log_dir).glob("events.*.maps")] == [True]


def test_titles_name_the_run_and_cut_long_names():
    assert run_title("", "layer 0, head 1 · step 5") == "defaults\nlayer 0, head 1 · step 5"
    long = "model=multihead,heads=3,position=rope,kv_heads=1,window=4,lr=0.001"
    first, second = run_title(long, "x").splitlines()
    assert len(first) == 40 and first.endswith("…") and long.startswith(first[:-1]) and second == "x"
