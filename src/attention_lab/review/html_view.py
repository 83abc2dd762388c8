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

HEAD_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
               "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]  # d3 category10, as bertviz

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
</style>
</head>
<body>
<h1>Attention head view</h1>
<p class="sentence">__SENTENCE__</p>
<p class="run">__DESCRIPTION__</p>
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
<script>
"use strict";
const DATA = JSON.parse(document.getElementById("attention-data").textContent);
const SVG_NS = "http://www.w3.org/2000/svg";
const ROW = 28, TOP = 40, GAP = 240, PAD = 12;
const nLayers = DATA.weights.length, nHeads = DATA.weights[0].length;
const state = { layer: 0, heads: [0], hover: null };
let layout = null;  // x positions of the two columns, set by render()
const svg = document.getElementById("view"), tooltip = document.getElementById("tooltip");

function color(head) { return DATA.colors[head % DATA.colors.length]; }
function fmt(w) { return w.toFixed(2); }
function clampInt(value, lo, hi, fallback) {
  const n = parseInt(value, 10);
  return Number.isFinite(n) && n >= lo && n <= hi ? n : fallback;
}

function readHash() {
  const params = new URLSearchParams(location.hash.replace(/^#/, ""));
  state.layer = clampInt(params.get("layer"), 0, nLayers - 1, state.layer);
  if (params.get("head") === "all") { state.heads = [...Array(nHeads).keys()]; }
  else if (params.has("head")) {
    const heads = params.get("head").split(",").map(h => clampInt(h, 0, nHeads - 1, -1)).filter(h => h >= 0);
    if (heads.length) state.heads = [...new Set(heads)].sort((a, b) => a - b);
  }
}
function writeHash() {
  const head = state.heads.length === nHeads && nHeads > 1 ? "all" : state.heads.join(",");
  history.replaceState(null, "", "#layer=" + state.layer + "&head=" + head);
}

function el(name, attrs, text) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function textWidth(words) {  // measured once with the page's font
  const probe = el("text", { x: 0, y: -100 });
  svg.appendChild(probe);
  let width = 0;
  for (const w of words) { probe.textContent = w; width = Math.max(width, probe.getComputedTextLength()); }
  probe.remove();
  return Math.ceil(width);
}

function setup() {
  const layerSelect = document.getElementById("layer");
  for (let l = 0; l < nLayers; l++) layerSelect.appendChild(new Option(String(l), String(l)));
  layerSelect.addEventListener("change", () => { state.layer = Number(layerSelect.value); update(); });
  const heads = document.getElementById("heads");
  for (let h = 0; h < nHeads; h++) {
    const b = document.createElement("button");
    b.type = "button"; b.className = "head"; b.dataset.head = h; b.textContent = h;
    b.style.background = color(h); b.title = "head " + h + " (Shift+click: add or remove)";
    b.addEventListener("click", event => {
      if (event.shiftKey) {
        const i = state.heads.indexOf(h);
        if (i >= 0 && state.heads.length > 1) state.heads.splice(i, 1);
        else if (i < 0) { state.heads.push(h); state.heads.sort((a, b) => a - b); }
      } else { state.heads = [h]; }
      update();
    });
    heads.appendChild(b);
  }
  document.getElementById("all-heads").addEventListener("click", () => {
    state.heads = [...Array(nHeads).keys()]; update();
  });
  window.addEventListener("hashchange", () => { readHash(); render(); });
}

function update() { writeHash(); render(); }

function render() {
  document.getElementById("layer").value = String(state.layer);
  for (const b of document.querySelectorAll("button.head"))
    b.classList.toggle("selected", state.heads.includes(Number(b.dataset.head)));
  const headText = state.heads.length === 1 ? "head " + state.heads[0] : "heads " + state.heads.join(", ");
  document.getElementById("status").textContent =
    "layer " + state.layer + " of " + nLayers + " · " + headText + " of " + nHeads +
    " · line opacity = attention weight";

  svg.replaceChildren();
  const leftW = textWidth(DATA.query_words), rightW = textWidth(DATA.key_words);
  const labelW = 44 * Math.max(1, state.heads.length);
  const xLeft = PAD + labelW + leftW, xRight = xLeft + GAP;
  layout = { xLeft: xLeft, xRight: xRight, leftW: leftW, rightW: rightW };
  const rows = Math.max(DATA.query_words.length, DATA.key_words.length);
  svg.setAttribute("width", xRight + rightW + labelW + PAD);
  svg.setAttribute("height", TOP + rows * ROW + PAD);
  svg.appendChild(el("text", { x: xLeft, y: 14, "text-anchor": "end", class: "column-title" }, DATA.query_axis));
  svg.appendChild(el("text", { x: xRight, y: 14, class: "column-title" }, "key (attended to)"));
  const y = i => TOP + i * ROW + ROW / 2;
  const weights = DATA.weights[state.layer];

  const lines = el("g", { class: "lines" });
  for (const h of state.heads) {
    for (let q = 0; q < DATA.query_words.length; q++) {
      for (let k = 0; k < DATA.key_words.length; k++) {
        const w = weights[h][q][k];
        const line = el("line", { class: "attn", x1: xLeft + 6, y1: y(q), x2: xRight - 6, y2: y(k),
          stroke: color(h), "stroke-opacity": w, "data-head": h, "data-q": q, "data-k": k, "data-weight": w });
        line.appendChild(el("title", {}, "head " + h + ": " + DATA.query_words[q] + " → " + DATA.key_words[k] + "  " + fmt(w)));
        line.addEventListener("mousemove", event => showTooltip(event, line.firstChild.textContent));
        line.addEventListener("mouseleave", hideTooltip);
        lines.appendChild(line);
      }
    }
  }
  svg.appendChild(lines);
  column(DATA.query_words, "left", xLeft, "end", y, leftW);
  column(DATA.key_words, "right", xRight, "start", y, rightW);
  applyHover();
}

function column(words, side, x, anchor, y, width) {
  const g = el("g", { class: "column " + side });
  words.forEach((word, i) => {
    const x0 = anchor === "end" ? x - width - 4 : x - 4;
    g.appendChild(el("rect", { class: "token-bg", "data-side": side, "data-index": i,
      x: x0, y: y(i) - ROW / 2 + 2, width: width + 8, height: ROW - 4, rx: 3 }));
    const t = el("text", { class: "token " + side, "data-index": i, x: x, y: y(i), "text-anchor": anchor }, word);
    g.appendChild(t);
  });
  g.addEventListener("mouseover", event => {
    const i = event.target.getAttribute("data-index");
    if (i !== null) { state.hover = { side: side, index: Number(i) }; applyHover(); }
  });
  g.addEventListener("mouseleave", () => { state.hover = null; applyHover(); });
  svg.appendChild(g);
}

function applyHover() {
  for (const node of svg.querySelectorAll(".weight-label")) node.remove();
  for (const node of svg.querySelectorAll(".active")) node.classList.remove("active");
  const hover = state.hover;
  for (const line of svg.querySelectorAll("line.attn")) {
    const keep = !hover || Number(line.dataset[hover.side === "left" ? "q" : "k"]) === hover.index;
    line.classList.toggle("hidden", !keep);
  }
  if (!hover) return;
  for (const node of svg.querySelectorAll('[data-index="' + hover.index + '"]'))
    if (node.closest(".column." + hover.side)) node.classList.add("active");
  // Weights beside the other column, one aligned column of numbers per selected head, in its colour.
  const other = hover.side === "left" ? "right" : "left";
  const weights = DATA.weights[state.layer];
  for (const token of svg.querySelectorAll(".token." + other)) {
    const j = Number(token.dataset.index);
    state.heads.forEach((h, n) => {
      const w = hover.side === "left" ? weights[h][hover.index][j] : weights[h][j][hover.index];
      const x = other === "right" ? layout.xRight + layout.rightW + 12 + 44 * n
                                  : layout.xLeft - layout.leftW - 12 - 44 * (state.heads.length - 1 - n);
      svg.appendChild(el("text", { class: "weight-label", x: x, y: token.getAttribute("y"), fill: color(h),
        "text-anchor": other === "right" ? "start" : "end", "data-head": h, "data-index": j }, fmt(w)));
    });
  }
}

function showTooltip(event, text) {
  tooltip.textContent = text; tooltip.hidden = false;
  tooltip.style.left = (event.clientX + 12) + "px"; tooltip.style.top = (event.clientY + 12) + "px";
}
function hideTooltip() { tooltip.hidden = true; }

readHash();
setup();
render();
document.body.dataset.ready = "true";
</script>
</body>
</html>
"""


def _json_for_script(value) -> str:
    """JSON that cannot close the <script> element it sits in (``<unk>`` contains '<')."""
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(maps: AttentionMaps, *, decimals: int = 4) -> str:
    data = {
        "text": maps.text,
        "query_words": maps.query_words,
        "key_words": maps.words,
        "predictions": maps.predictions,
        "query_axis": maps.query_axis,
        "colors": HEAD_COLORS,
        # weights[layer][head][query][key], rounded: the page stays small, lines are drawn from these
        "weights": [[[[round(float(w), decimals) for w in row] for row in head] for head in layer]
                    for layer in maps.weights],
    }
    sentence = f"input “{' '.join(maps.words)}”  →  prediction “{' '.join(maps.predictions)}”"
    values = {"TITLE": html.escape(maps.text), "SENTENCE": html.escape(sentence),
              "DESCRIPTION": html.escape(maps.description), "DATA": _json_for_script(data)}
    return re.sub(r"__(TITLE|SENTENCE|DESCRIPTION|DATA)__", lambda m: values[m.group(1)], _TEMPLATE)


def write_html(maps: AttentionMaps, path: Path) -> Path:
    path.write_text(render_html(maps), encoding="utf-8")
    return path
