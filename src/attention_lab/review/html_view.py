"""A self-contained interactive attention page in the style of bertviz's head view.

Queries on the left, keys on the right, one line per (query, key) pair whose opacity is the
attention weight, coloured by head. Choose the layer (drop-down) and the head (coloured buttons;
Shift+click overlays several); hovering a word keeps only its lines and writes their weights beside
the other column; hovering a line shows its weight. The address keeps the view
(``page.html#layer=1&head=2``). Everything (data, CSS, JS) is inline: no network access needed.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

from attention_lab.review.attention_maps import AttentionMaps
from attention_lab.review.cli import written_text

# The renderer, shared with the TensorBoard tab (which imports the same file as a module).
HEAD_VIEW_JS = Path(__file__).with_name("static") / "head_view.js"

_TEMPLATE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Attention head view · __TITLE__</title>
<style>
  body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 24px;
         color: #222; background: #fff; }
  h1 { font-size: 18px; margin: 0 0 6px; }
  .sentence { font-size: 16px; margin: 4px 0; }
  .run { font-size: 12px; color: #666; margin: 2px 0 12px; }
  #controls { display: flex; flex-wrap: wrap; align-items: center; gap: 10px; margin-bottom: 6px; }
  #controls select { font-size: 14px; padding: 2px 4px; }
  #heads { display: inline-flex; gap: 4px; }
  .head { width: 30px; height: 26px; border: 2px solid transparent; border-radius: 4px; color: #fff;
          font-weight: 600; cursor: pointer; opacity: 0.35; }
  .head.selected { opacity: 1; border-color: #222; }
  #all-heads { font-size: 12px; cursor: pointer; }
  #status { font-size: 13px; color: #444; margin: 6px 0 4px; min-height: 1.2em; }
  svg text { font-size: 15px; dominant-baseline: middle; }
  .token { cursor: default; }
  .token.active { font-weight: 700; }
  .token-bg { fill: transparent; }
  .token-bg.active { fill: #f1f1f1; }
  .column-title { font-size: 12px; fill: #777; }
  .weight-label { font-size: 12px; font-variant-numeric: tabular-nums; }
  line.attn { stroke-width: 2.5; }
  line.attn.hidden { display: none; }
  #tooltip { position: fixed; pointer-events: none; background: rgba(30, 30, 30, 0.9); color: #fff;
             font-size: 12px; padding: 3px 7px; border-radius: 3px; white-space: nowrap; }
  .help { font-size: 12px; color: #777; max-width: 720px; }
  .opening { font-size: 13px; color: #444; margin: 0 0 10px; }
  .opening:empty { display: none; }
</style>
</head>
<body>
<h1>Attention head view</h1>
<p class="sentence">__SENTENCE__</p>
<p class="run">__DESCRIPTION__</p>
<p class="opening">__OPENING__</p>
<div id="controls">
  <label>Layer <select id="layer" aria-label="layer"></select></label>
  <span>Head</span><span id="heads"></span>
  <button id="all-heads" type="button">all heads</button>
</div>
<p id="status" aria-live="polite"></p>
<svg id="view" role="img" aria-label="attention lines between words"></svg>
<div id="tooltip" hidden></div>
<p class="help">Click a head to show it alone; Shift+click adds or removes heads. Hover a word to keep only
its lines and read their weights; hover a line for one weight. The address (for example
<code>#layer=1&amp;head=2</code>) keeps the view.</p>
<script id="attention-data" type="application/json">__DATA__</script>
<script type="module">
__HEAD_VIEW_JS__
const DATA = JSON.parse(document.getElementById("attention-data").textContent);
mountHeadView({ layerSelect: document.getElementById("layer"), heads: document.getElementById("heads"),
                allHeads: document.getElementById("all-heads"), status: document.getElementById("status"),
                svg: document.getElementById("view"), tooltip: document.getElementById("tooltip") },
              DATA, { useHash: true, initial: DATA.initial });
document.body.dataset.ready = "true";
</script>
</body>
</html>
"""


def _json_for_script(value) -> str:
    """JSON that cannot close the <script> element it sits in (``<unk>`` contains '<')."""
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def head_view_script() -> str:
    """The shared renderer, ready to sit inside the page's module script."""
    script = HEAD_VIEW_JS.read_text(encoding="utf-8")
    if "</script" in script.lower():  # would end the inline element early
        raise ValueError(f"{HEAD_VIEW_JS} contains '</script', which cannot be inlined")
    return script


def opening_line(opening: dict | None) -> str:
    if opening is None:
        return ""
    return (f"Opens on layer {opening['layer']}, head {opening['head']}: the head scoring highest on "
            f"{opening['kind']} ({opening['score']:.2f}) in the run's final validation.")


def render_html(maps: AttentionMaps, *, decimals: int = 4, opening: dict | None = None) -> str:
    """The page; ``opening``: {kind, layer, head, score} of the head to show first (else layer 0, head 0)."""
    data = {
        "text": maps.text,
        "query_words": maps.query_words,
        "key_words": maps.words,
        "predictions": maps.predictions,
        "query_axis": maps.query_axis,
        # weights[layer][head][query][key], rounded: the page stays small, lines are drawn from these
        "weights": [[[[round(float(w), decimals) for w in row] for row in head] for head in layer]
                    for layer in maps.weights],
        "scale": maps.colour_scale().as_dict(),  # 0–1, or symmetric around 0 for a signed map
        "initial": None if opening is None else {"layer": opening["layer"], "head": opening["head"]},
    }
    sentence = f"input “{' '.join(maps.words)}”  →  prediction “{' '.join(maps.predictions)}”"
    values = {"TITLE": html.escape(maps.text), "SENTENCE": html.escape(sentence),
              "DESCRIPTION": html.escape(maps.description), "OPENING": html.escape(opening_line(opening)),
              "DATA": _json_for_script(data), "HEAD_VIEW_JS": head_view_script()}
    return re.sub(r"__(TITLE|SENTENCE|DESCRIPTION|OPENING|DATA|HEAD_VIEW_JS)__", lambda m: values[m.group(1)],
                  _TEMPLATE)


def write_html(maps: AttentionMaps, path: Path, opening: dict | None = None) -> Path:
    return written_text(path, render_html(maps, opening=opening))
