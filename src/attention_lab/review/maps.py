"""Attention maps of any sentence from a trained run: a layers x heads heatmap grid (PNG), the
interactive head view (HTML, see :mod:`attention_lab.review.html_view`) and TensorBoard images.

Finding the run's files (:func:`find_run`) needs neither torch nor Lightning, so a wrong path fails
fast; :func:`load_module` and everything after it import them.
"""

from __future__ import annotations

import json
import logging
import re
import textwrap
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from attention_lab.review.cli import ReviewError

log = logging.getLogger(__name__)

DPI = 100
CHECKPOINT_NAMES = ("best.ckpt", "last.ckpt")


@dataclass
class RunFiles:
    """A trained run: its directory, the checkpoint to load and its composed config (if saved)."""

    run_dir: Path
    checkpoint: Path
    config: Any = None  # DictConfig of <run>/.hydra/config.yaml, unresolved; None without it


@dataclass
class AttentionMaps:
    """Attention of one sentence through every layer and head of a model."""

    text: str
    words: list[str]  # keys: the input words as the model saw them (unknown words -> <unk>)
    query_words: list[str]  # rows: the same words, or output positions for encoder-decoder models
    predictions: list[str]
    weights: list[Any]  # one (H, T_q, T_k) numpy array per layer
    encoder_decoder: bool = False
    description: str = ""  # the run: directory and main settings
    unknown: list[str] = field(default_factory=list)  # words of the text not in the vocabulary

    @property
    def layers(self) -> int:
        return len(self.weights)

    @property
    def heads(self) -> int:
        return int(self.weights[0].shape[0]) if self.weights else 0

    @property
    def query_axis(self) -> str:
        return "output position" if self.encoder_decoder else "query"


# ---------------------------------------------------------------------------------------------- run files

def find_run(path: str | Path) -> RunFiles:
    """The run dir's best checkpoint (last.ckpt when no validation ran before training stopped) and
    config. ``path`` may also be a ``.ckpt`` file. Raises ReviewError with one line otherwise."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ReviewError(f"run={path} does not exist: pass a run directory such as outputs/runs/<date>/<time>")
    if path.is_file():
        if path.suffix != ".ckpt":
            raise ReviewError(f"run={path} is a file but not a checkpoint (.ckpt): pass the run directory")
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else path.parent
        return RunFiles(run_dir, path, load_run_config(run_dir))
    checkpoint_dir = path / "checkpoints"
    found = [checkpoint_dir / name for name in CHECKPOINT_NAMES if (checkpoint_dir / name).is_file()]
    if not found:  # e.g. best-v1.ckpt written beside an older best.ckpt
        found = sorted(checkpoint_dir.glob("*.ckpt"), key=lambda p: p.stat().st_mtime, reverse=True)
    if not found:
        if (path / "multirun.yaml").is_file():
            jobs = sorted(p.parent.name for p in path.glob("*/.hydra"))
            example = f" such as {path / jobs[0]}" if jobs else ""
            raise ReviewError(f"run={path} is a sweep directory: pass one of its job directories{example}")
        raise ReviewError(f"run={path} has no checkpoint (looked for checkpoints/best.ckpt and last.ckpt): "
                          "pass a run directory whose training has saved one")
    if found[0].name != "best.ckpt":
        log.warning("%s has no best.ckpt (no validation ran before training stopped): using %s",
                    path, found[0].name)
    return RunFiles(path, found[0], load_run_config(path))


def load_run_config(run_dir: Path):
    config_file = run_dir / ".hydra" / "config.yaml"
    if not config_file.is_file():
        return None
    from omegaconf import OmegaConf

    return OmegaConf.load(config_file)


def describe_run(files: RunFiles, hparams: dict[str, Any]) -> str:
    """One line: the run directory and the settings that shape its attention maps."""
    cfg = files.config
    if cfg is not None:
        model, block, task = cfg.get("model", {}), cfg.get("block", {}), cfg.get("task", {})
        parts = [f"model={model.get('name', hparams.get('attention'))}", f"heads={hparams.get('num_heads')}",
                 f"layers={hparams.get('layers')}", f"d_model={hparams.get('d_model')}", f"mask={hparams.get('mask')}",
                 f"block={block.get('name', '?')}", f"task={task.get('name', '?')}"]
    else:
        parts = [f"model={hparams.get('attention')}", f"heads={hparams.get('num_heads')}",
                 f"layers={hparams.get('layers')}", f"d_model={hparams.get('d_model')}", f"mask={hparams.get('mask')}"]
    run_name = "/".join(files.run_dir.resolve().parts[-2:])
    return f"{run_name} · {' '.join(parts)} · {files.checkpoint.name}"


def load_module(files: RunFiles):
    """(AttentionLitModule in eval mode on the CPU, global step of the checkpoint)."""
    import torch

    from attention_lab.lit_module import AttentionLitModule

    try:
        module = AttentionLitModule.load_from_checkpoint(files.checkpoint, map_location="cpu")
        step = int(torch.load(files.checkpoint, map_location="cpu", weights_only=False).get("global_step", 0))
    except Exception as err:  # a truncated or foreign file: one line, not a traceback
        raise ReviewError(f"cannot load checkpoint {files.checkpoint}: {type(err).__name__}: {err}".splitlines()[0]) from None
    module.eval()
    return module, step


# ---------------------------------------------------------------------------------------------- words -> maps

def prepare_words(text: str, vocab: list[str], context_length: int) -> tuple[list[str], list[str]]:
    """Tokenize like the training data; words outside the vocabulary become <unk> (with a warning,
    and a hint when only the case differs); text longer than the positional table is cut."""
    from attention_lab.data.corpus import UNK, tokenize

    words = tokenize(text)
    if not words:
        raise ReviewError(f"text={text!r} contains no words")
    if len(words) > context_length:
        log.warning("text has %d words; only the first %d (model.context_length) are used", len(words), context_length)
        words = words[:context_length]
    known = set(vocab)
    unknown = [w for w in words if w not in known]
    if unknown:
        by_lower = {w.lower(): w for w in vocab}
        hints = [f"{w} (did you mean {by_lower[w.lower()]}?)" if w.lower() in by_lower else w for w in unknown]
        log.warning("words not in the vocabulary are mapped to %s: %s", UNK, ", ".join(hints))
    return [w if w in known else UNK for w in words], unknown


def compute_maps(module, text: str, *, description: str = "") -> AttentionMaps:
    """Run ``text`` through ``module`` (an AttentionLitModule) and collect every layer's weights."""
    words, unknown = prepare_words(text, module.vocab, module.hparams.context_length)
    predictions, weights = module.predict_words([words])
    predictions = predictions[0]
    encoder_decoder = bool(module.model.encoder_decoder)
    # Encoder-decoder: rows are output positions (learned queries), labelled with what they predict.
    query_words = [f"out{i}→{p}" for i, p in enumerate(predictions)] if encoder_decoder else list(words)
    arrays = [w[0].detach().float().cpu().numpy() for w in weights]
    return AttentionMaps(text=text, words=words, query_words=query_words, predictions=predictions, weights=arrays,
                         encoder_decoder=encoder_decoder, description=description, unknown=unknown)


# ---------------------------------------------------------------------------------------------- PNG grid

def grid_figsize(layers: int, heads: int, n_queries: int, n_keys: int, title_lines: int = 2) -> tuple[float, float]:
    """Inches of the grid figure: square-ish panels sized for their words, a colorbar, the title."""
    panel = 1.6 + 0.42 * max(n_queries, n_keys, 3)
    return round(max(heads * panel + 1.3, 6.5), 2), round(layers * panel + 0.5 + 0.25 * title_lines, 2)


def grid_title(maps: AttentionMaps, width_in: float) -> list[str]:
    """Input and prediction, then the run, wrapped to the figure's width (about 11 characters an inch)."""
    width = max(40, int(width_in * 11))
    lines = textwrap.wrap(f"input “{' '.join(maps.words)}”   →   prediction “{' '.join(maps.predictions)}”", width)
    return lines + (textwrap.wrap(maps.description, width) if maps.description else [])


def grid_figure(maps: AttentionMaps):
    """Rows = layers, columns = heads; words on both axes of every panel; one shared colorbar."""
    from matplotlib.cm import ScalarMappable
    from matplotlib.colors import Normalize
    from matplotlib.figure import Figure

    from attention_lab.plotting import draw_heatmap

    rows, cols = maps.layers, maps.heads
    n_q, n_k = len(maps.query_words), len(maps.words)
    title = grid_title(maps, grid_figsize(rows, cols, n_q, n_k)[0])
    fig = Figure(figsize=grid_figsize(rows, cols, n_q, n_k, len(title)), dpi=DPI, layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for layer in range(rows):
        for head in range(cols):
            ax = axes[layer][head]
            draw_heatmap(ax, maps.weights[layer][head], maps.query_words, maps.words, f"layer {layer} · head {head}")
            ax.set_xlabel("key (attended to)" if layer == rows - 1 else "")
            ax.set_ylabel(maps.query_axis if head == 0 else "")
    fig.colorbar(ScalarMappable(Normalize(0.0, 1.0), cmap="viridis"), ax=axes, shrink=min(1.0, 0.9 / rows ** 0.5),
                 label="attention weight")
    fig.suptitle("\n".join(title), fontsize=11)
    return fig


def save_grid_png(maps: AttentionMaps, path: Path) -> Path:
    """The grid as a 256-colour PNG (a third of the RGBA size, same look), its layout in the metadata."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image, PngImagePlugin

    canvas = FigureCanvasAgg(grid_figure(maps))
    canvas.draw()
    image = Image.frombuffer("RGBA", canvas.get_width_height(), canvas.buffer_rgba()).convert("RGB")
    info = PngImagePlugin.PngInfo()
    layout = {"layers": maps.layers, "heads": maps.heads, "query_words": maps.query_words, "key_words": maps.words,
              "title": canvas.figure.get_suptitle().splitlines()}
    info.add_text("Title", maps.text)
    info.add_text("Description", json.dumps(layout))
    info.add_text("Software", "attention-lab scripts/visualize.py")
    image.quantize(256, method=Image.Quantize.MEDIANCUT).save(path, pnginfo=info, optimize=True)
    return path


# ---------------------------------------------------------------------------------------------- outputs

def slugify(text: str, max_len: int = 40) -> str:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()
    return slug[:max_len].rstrip("-") or "text"


def unique_stem(out_dir: Path, text: str, suffixes: tuple[str, ...] = (".png", ".html")) -> str:
    """``<slug of text>-<timestamp>``, with ``-2``, ``-3``... if those files exist: never overwrites."""
    base = f"{slugify(text)}-{datetime.now():%Y%m%d-%H%M%S}"
    stem, n = base, 1
    while any((out_dir / f"{stem}{suffix}").exists() for suffix in suffixes):
        n += 1
        stem = f"{base}-{n}"
    return stem


def add_to_tensorboard(maps: AttentionMaps, log_dir: Path, step: int, tag: str) -> None:
    """The grid and one figure per head, under ``visualize/<tag>/...`` in the run's TensorBoard."""
    from torch.utils.tensorboard import SummaryWriter

    from attention_lab.plotting import attention_figure

    writer = SummaryWriter(log_dir=str(log_dir))
    try:
        writer.add_figure(f"visualize/{tag}/grid", grid_figure(maps), step, close=False)
        for layer, layer_weights in enumerate(maps.weights):
            for head, head_weights in enumerate(layer_weights):
                fig = attention_figure(head_weights, maps.query_words, maps.words, f"layer {layer}, head {head}")
                writer.add_figure(f"visualize/{tag}/layer{layer}/head{head}", fig, step, close=False)
        writer.add_text(f"visualize/{tag}/text", f"{' '.join(maps.words)} → {' '.join(maps.predictions)}", step)
    finally:
        writer.close()


def visualize(run: str | Path, text: str | None = None, *, out: str | Path | None = None,
              tensorboard: bool = False) -> dict[str, Any]:
    """What ``scripts/visualize.py`` does. Returns the maps and the paths written."""
    from attention_lab.review.html_view import write_html

    files = find_run(run)
    if text is None:
        text = (files.config or {}).get("probe") or "Your journey starts with one step"
        log.info("no text= given: using the run's probe sentence %r", text)
    module, step = load_module(files)
    maps = compute_maps(module, text, description=describe_run(files, dict(module.hparams)))
    out_dir = Path(out).expanduser() if out else files.run_dir / "visualize"
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = unique_stem(out_dir, text)
    result: dict[str, Any] = {"maps": maps, "step": step, "png": save_grid_png(maps, out_dir / f"{stem}.png"),
                              "html": write_html(maps, out_dir / f"{stem}.html")}
    if tensorboard:
        log_dir = files.run_dir / "tensorboard"
        add_to_tensorboard(maps, log_dir, step, stem)
        result["tensorboard"] = log_dir
    return result
