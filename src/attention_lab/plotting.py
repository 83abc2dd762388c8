"""Attention heatmaps with words on the axes (matplotlib, Agg backend, no pyplot state)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402


def draw_heatmap(ax, weights, query_words: Sequence[str], key_words: Sequence[str], title: str = "") -> None:
    """weights: (T_q, T_k) array-like. Rows = queries (y axis), columns = keys (x axis)."""
    ax.imshow(weights, cmap="viridis", vmin=0.0, vmax=1.0)
    ax.set_xticks(range(len(key_words)), labels=key_words, rotation=45, ha="right")
    ax.set_yticks(range(len(query_words)), labels=query_words)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    if len(query_words) * len(key_words) <= 100:  # annotate small maps with their weights
        for i in range(len(query_words)):
            for j in range(len(key_words)):
                value = float(weights[i][j])
                ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=7,
                        color="black" if value > 0.6 else "white")


def attention_figure(weights, query_words: Sequence[str], key_words: Sequence[str], title: str = "") -> Figure:
    size = 1.5 + 0.55 * max(len(query_words), len(key_words))
    fig = Figure(figsize=(size + 1.0, size), layout="constrained")
    ax = fig.add_subplot()
    draw_heatmap(ax, weights, query_words, key_words, title)
    im = ax.images[0]
    fig.colorbar(im, ax=ax, fraction=0.046)
    return fig
