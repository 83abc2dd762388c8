"""Callbacks that show what attention learns: heatmaps and sample predictions in TensorBoard."""

from __future__ import annotations

import io
import logging

import lightning as L
import numpy as np
from lightning.pytorch.loggers import TensorBoardLogger
from lightning.pytorch.utilities import rank_zero_only

from attention_lab.data.corpus import UNK, tokenize
from attention_lab.lit_module import AttentionLitModule
from attention_lab.plotting import ANNOTATED_CELLS, ANNOTATION_SIZE, attention_figure, weight_label

log = logging.getLogger(__name__)


def png_bytes(image: np.ndarray) -> bytes:
    """(H, W, 3) uint8 -> PNG, with Pillow's fastest compression (flat-colour heatmaps compress well anyway)."""
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(image).save(buffer, format="PNG", compress_level=1)
    return buffer.getvalue()


def add_image(writer, tag: str, image: np.ndarray, step: int) -> None:
    """``writer.add_image(tag, image, step, dataformats="HWC")`` for an (H, W, 3) uint8 image. With torch's
    SummaryWriter, without add_image's float copy of the image and its slow PNG encoding (15 ms -> 4 ms)."""
    from torch.utils.tensorboard import SummaryWriter

    if not isinstance(writer, SummaryWriter):  # e.g. tensorboardX: its own protobuf classes
        writer.add_image(tag, image, step, dataformats="HWC")
        return
    from tensorboard.compat.proto.summary_pb2 import Summary

    height, width, channels = image.shape
    encoded = Summary.Image(height=height, width=width, colorspace=channels,
                            encoded_image_string=png_bytes(image))
    writer._get_file_writer().add_summary(Summary(value=[Summary.Value(tag=tag, image=encoded)]), step)


def _text_mask(font, text: str, anchor: str) -> tuple[np.ndarray, int, int]:
    """``text`` rasterised by PIL: its coverage (uint16, 0-255) and the offset of its top-left corner
    from the anchor point."""
    from PIL import Image, ImageDraw

    left, top, right, bottom = font.getbbox(text, anchor=anchor)
    mask = Image.new("L", (max(right - left, 0), max(bottom - top, 0)), 0)
    ImageDraw.Draw(mask).text((-left, -top), text, fill=255, font=font, anchor=anchor)
    return np.asarray(mask, dtype=np.uint16), left, top


def _blend(image: np.ndarray, x: int, y: int, alpha: np.ndarray, color: np.ndarray) -> None:
    """Paints ``color`` through the coverage ``alpha`` with its top-left corner at (x, y), clipped."""
    height, width = image.shape[:2]
    x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + alpha.shape[1], width), min(y + alpha.shape[0], height)
    if x0 >= x1 or y0 >= y1:
        return
    region = image[y0:y1, x0:x1]
    a = alpha[y0 - y:y1 - y, x0 - x:x1 - x, None]
    region[...] = (region * (255 - a) + color * a + 127) // 255


class HeatmapImages:
    """Attention heatmaps as (H, W, 3) uint8 images that look like ``plotting.attention_figure``, ~50x faster.

    Drawing a matplotlib figure costs 60-100 ms (mostly text layout), once per layer and head at every
    logging event: it made logging the maps cost several times the training itself. Here
    attention_figure draws what does not change (words on the axes, axis labels, colorbar) once per word
    list; each map then only paints its cells (numpy, the figure's own colormap) and its weights and
    title (the figure's font, rasterised by PIL; the 101 possible weights once) into a reused buffer:
    about 1 ms, and 3-4 ms more for the PNG (Pillow)."""

    def __init__(self) -> None:
        self._frames: dict[tuple[tuple[str, ...], tuple[str, ...]], dict] = {}

    def render(self, weights, query_words: list[str], key_words: list[str], title: str = "") -> np.ndarray:
        """The heatmap, a new (H, W, 3) uint8 array."""
        return self._paint(weights, query_words, key_words, title)[0].copy()

    def _paint(self, weights, query_words: list[str], key_words: list[str], title: str) -> tuple[np.ndarray, dict]:
        from matplotlib.colors import to_rgb

        weights = np.asarray(weights, dtype=np.float64)
        frame = self._frame(tuple(query_words), tuple(key_words))
        image = frame["image"]  # holds the frame; the cells (with their weights) and the title band change
        image[frame["title_band"]] = frame["pixels"][frame["title_band"]]
        colors = frame["colors_of"](weights)
        cells = image[frame["box"]]
        pixel_rows = np.repeat(colors, frame["col_widths"], axis=1)  # (n_q, width, 3): one pixel row per query
        for i, (r0, r1) in enumerate(frame["row_spans"]):
            cells[r0:r1] = pixel_rows[i]
        edge = frame["edge"]
        cells[edge] = cells[edge] * frame["edge_shade"] // 255  # the spines drawn over the image
        for (i, j), (x, y) in frame["centers"].items():
            text, color = weight_label(float(weights[i, j]))
            if text not in frame["labels"]:
                frame["labels"][text] = _text_mask(frame["small"], text, "mm")
            if color not in frame["colors"]:
                frame["colors"][color] = np.round(np.array(to_rgb(color)) * 255).astype(np.uint16)
            alpha, left, top = frame["labels"][text]
            _blend(image, x + left, y + top, alpha, frame["colors"][color])
        if title:
            alpha, left, top = _text_mask(frame["large"], title, "ms")
            x, y = frame["title_at"]
            _blend(image, x + left, y + top, alpha, np.zeros(3, dtype=np.uint16))
        return image, frame

    @staticmethod
    def _colors(mappable):
        """weights -> (..., 3) uint8 colours, as the figure's image maps them. For its linear norm, a lookup
        in the colormap's table (matplotlib's masked-array path costs more than painting the map)."""
        from matplotlib.colors import Normalize

        norm, cmap = mappable.norm, mappable.get_cmap()
        if type(norm) is not Normalize or norm.vmin is None or norm.vmax is None or norm.vmax <= norm.vmin:
            return lambda weights: mappable.to_rgba(weights, bytes=True)[..., :3]
        table = cmap(np.arange(cmap.N), bytes=True)[:, :3]
        vmin, span, n = float(norm.vmin), float(norm.vmax - norm.vmin), cmap.N

        def colors(weights: np.ndarray) -> np.ndarray:
            scaled = np.nan_to_num((weights - vmin) / span * n, nan=0.0)
            return table[np.clip(scaled, 0, n - 1).astype(int)]  # as Colormap.__call__: 1.0 -> the last colour

        return colors

    def _frame(self, query_words: tuple[str, ...], key_words: tuple[str, ...]) -> dict:
        key = (query_words, key_words)
        if key not in self._frames:
            self._frames[key] = self._draw_frame(query_words, key_words)
        return self._frames[key]

    @staticmethod
    def _draw_frame(query_words: tuple[str, ...], key_words: tuple[str, ...]) -> dict:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.font_manager import FontProperties, findfont
        from PIL import ImageFont

        n_q, n_k = len(query_words), len(key_words)
        fig = attention_figure(np.zeros((n_q, n_k)), query_words, key_words, title="layer 0, head 0")
        ax = fig.axes[0]
        mappable = ax.images[0]
        mappable.set_visible(False)
        for text in list(ax.texts):
            text.remove()
        ax.title.set_alpha(0.0)  # invisible, but keeps its room in any layout
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        pixels = np.asarray(canvas.buffer_rgba())[..., :3].copy()
        height, width = pixels.shape[:2]
        to_display = ax.transData.transform  # display coordinates: pixels, y up
        (left, top), (right, bottom) = to_display([(-0.5, -0.5), (n_k - 0.5, n_q - 0.5)])
        # The pixels the image covers (its edges snapped to the pixel grid, as Agg does) and their cells.
        x0, x1, y0, y1 = round(left), round(right), round(height - top), round(height - bottom)
        col_cell = np.clip(np.floor((np.arange(x0, x1) + 0.5 - left) / (right - left) * n_k), 0, n_k - 1)
        row_cell = np.clip(np.floor((np.arange(y0, y1) + 0.5 - (height - top)) / (top - bottom) * n_q), 0, n_q - 1)

        def spans(cell_of_pixel: np.ndarray, n: int) -> list[tuple[int, int]]:  # cell -> [first, last + 1) pixel
            return [(int(np.searchsorted(cell_of_pixel, c, "left")), int(np.searchsorted(cell_of_pixel, c, "right")))
                    for c in range(n)]

        shade = pixels[y0:y1, x0:x1]  # white, except where the spines were drawn over the image
        edge = np.nonzero((shade != 255).any(axis=-1))
        centers = {}
        if n_q * n_k <= ANNOTATED_CELLS:
            for i in range(n_q):
                for j in range(n_k):
                    x, y = to_display((j, i))
                    centers[i, j] = (round(x), round(height - y))
        dpi = fig.dpi
        title_at = (round((ax.bbox.x0 + ax.bbox.x1) / 2), round(height - ax.bbox.y1 - 6 / 72 * dpi))  # baseline

        def font(points: float):
            path = findfont(FontProperties())
            try:
                return ImageFont.truetype(path, points * dpi / 72)
            except TypeError:  # Pillow < 10.1: whole pixels only
                return ImageFont.truetype(path, round(points * dpi / 72))

        large = font(FontProperties(size="large").get_size_in_points())
        ascent, descent = large.getmetrics()
        title_band = slice(max(title_at[1] - ascent - 2, 0), min(title_at[1] + descent + 2, height))
        return {
            "pixels": pixels, "image": pixels.copy(),
            "colors_of": HeatmapImages._colors(mappable),
            "box": (slice(y0, y1), slice(x0, x1)), "edge": edge, "edge_shade": shade[edge].astype(np.uint16),
            "row_spans": spans(row_cell, n_q), "col_widths": [b - a for a, b in spans(col_cell, n_k)],
            "centers": centers, "labels": {}, "colors": {}, "title_at": title_at, "title_band": title_band,
            "small": font(ANNOTATION_SIZE), "large": large,
        }


class AttentionMapLogger(L.Callback):
    """Every ``every_n_steps`` training steps and at the end of training, logs one heatmap per
    layer and head for the probe sentence (tags ``attention/layer{l}/head{h}``) and a few
    validation predictions beside their targets (text ``predictions``)."""

    def __init__(self, probe: str = "Life is short, eat dessert first", every_n_steps: int = 100,
                 num_predictions: int = 4) -> None:
        self.probe_words = tokenize(probe)
        self.every_n_steps = every_n_steps
        self.num_predictions = num_predictions
        self._last_logged_step = -1
        self._images: HeatmapImages | None = HeatmapImages()

    def setup(self, trainer: L.Trainer, pl_module: AttentionLitModule, stage: str) -> None:
        unknown = [w for w in self.probe_words if w not in pl_module.vocab]
        if unknown:
            log.warning("probe words not in the vocabulary are shown as %s: %s", UNK, ", ".join(unknown))
        max_len = pl_module.hparams.context_length
        if len(self.probe_words) > max_len:
            log.warning("probe has %d words; only the first %d (model.context_length) are shown",
                        len(self.probe_words), max_len)
            self.probe_words = self.probe_words[:max_len]

    @staticmethod
    def tensorboard(trainer: L.Trainer):
        for logger in trainer.loggers:
            if isinstance(logger, TensorBoardLogger):
                return logger.experiment
        return None

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
        step = trainer.global_step
        if step % self.every_n_steps == 0:
            self.log_maps(trainer, pl_module)

    def on_train_end(self, trainer, pl_module) -> None:
        self.log_maps(trainer, pl_module)

    @rank_zero_only
    def log_maps(self, trainer: L.Trainer, pl_module: AttentionLitModule) -> None:
        writer = self.tensorboard(trainer)
        step = trainer.global_step
        if writer is None or step == self._last_logged_step:
            return
        self._last_logged_step = step
        words = [w if w in pl_module.vocab else UNK for w in self.probe_words]
        preds, weights = pl_module.predict_words([words])
        query_words = [f"out{i}" for i in range(len(words))] if pl_module.model.encoder_decoder else words
        maps = [(f"attention/layer{layer}/head{head}", f"layer {layer}, head {head} · step {step}", head_weights)
                for layer, layer_weights in enumerate(weights)
                for head, head_weights in enumerate(layer_weights[0].float().cpu().numpy())]
        self.write_maps(writer, maps, query_words, words, step)
        self.log_predictions(writer, trainer, pl_module, step)

    def write_maps(self, writer, maps: list[tuple[str, str, np.ndarray]], query_words: list[str],
                   key_words: list[str], step: int) -> None:
        """(tag, title, weights) heatmaps to TensorBoard."""
        for tag, title, weights in maps:
            if self._images is not None:
                try:
                    add_image(writer, tag, self._images.render(weights, query_words, key_words, title), step)
                    continue
                except Exception as err:  # noqa: BLE001 - a font or matplotlib oddity: draw figures instead
                    log.warning("fast heatmap rendering failed (%s); drawing matplotlib figures instead", err)
                    self._images = None
            writer.add_figure(tag, attention_figure(weights, query_words, key_words, title), step, close=True)

    def log_predictions(self, writer, trainer: L.Trainer, pl_module: AttentionLitModule, step: int) -> None:
        datamodule = trainer.datamodule
        if datamodule is None or datamodule.val_set is None:
            return
        inputs, targets = datamodule.val_set[: self.num_predictions]
        vocab = pl_module.vocab
        rows = ["| input | target | prediction | ok |", "|---|---|---|---|"]
        samples = [[vocab[i] for i in row if i != 0] for row in inputs.tolist()]
        preds, _ = pl_module.predict_words(samples)
        for sample, target, pred in zip(samples, targets.tolist(), preds, strict=True):
            target_words = [vocab[i] for i in target if i != 0]
            pred = pred[: len(target_words)]
            rows.append(f"| {' '.join(sample)} | {' '.join(target_words)} | {' '.join(pred)} | "
                        f"{'✓' if pred == target_words else '✗'} |")
        writer.add_text("predictions", "\n".join(rows), step)
