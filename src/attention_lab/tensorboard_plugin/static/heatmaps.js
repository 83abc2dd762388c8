// Attention maps as SVG heatmaps: every layer and head of one step as small maps (layers down, heads
// across), and one head enlarged with its words. Hovering a cell reports its query word, key word and weight.
// Words are set with textContent only.

import { formatWeight } from "./head_view.js";

const SVG_NS = "http://www.w3.org/2000/svg";
// matplotlib's viridis and RdBu_r at five stops, as the PNG maps of the same runs use
const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
const RDBU_R = [[5, 48, 97], [67, 147, 195], [247, 247, 247], [214, 96, 77], [103, 0, 31]];

// scale: {vmin, vmax, signed, label} from the server (plotting/colour_scale.py); none: the 0–1 scale.
export function weightColor(w, scale) {
  const lo = scale ? scale.vmin : 0, hi = scale ? scale.vmax : 1, stops = scale && scale.signed ? RDBU_R : VIRIDIS;
  const clipped = Math.min(Math.max(Number.isFinite(w) ? w : 0, lo), hi);
  const x = (clipped - lo) / (hi - lo) * (stops.length - 1);
  const i = Math.min(Math.floor(x), stops.length - 2), t = x - i;
  const rgb = stops[i].map((c, n) => Math.round(c + (stops[i + 1][n] - c) * t));
  return "rgb(" + rgb.join(",") + ")";
}

// The colour bar of a scale: a gradient from vmin to vmax with both ends and the label written out. The ends are
// 11px text (style.css, and export.js's style) with room for a signed value ("-0.35") left of the bar.
export function scaleLegend(scale) {
  const s = scale || { vmin: 0, vmax: 1, signed: false, label: "attention weight" };
  const width = 160, steps = 32, left = 44;
  const svg = svgElement("svg", { class: "scale-legend", width: left + width + 48, height: 30 });
  for (let i = 0; i < steps; i++) {
    const w = s.vmin + (s.vmax - s.vmin) * (i + 0.5) / steps;
    svg.appendChild(svgElement("rect", { x: left + i * width / steps, y: 2, width: width / steps + 0.5, height: 12,
      fill: weightColor(w, s), "data-weight": w }));
  }
  svg.appendChild(svgElement("text", { x: left - 4, y: 12, "text-anchor": "end", class: "legend-end" },
    formatWeight(s.vmin)));
  svg.appendChild(svgElement("text", { x: left + width + 4, y: 12, class: "legend-end" }, formatWeight(s.vmax)));
  svg.appendChild(svgElement("text", { x: left, y: 27, class: "legend-label" }, s.label));
  return svg;
}

function svgElement(name, attrs, text) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// One head's map: rows = queries, columns = keys. options: {cell, labels, onHover(cellInfo), onLeave}
export function heatmap(data, layer, head, options) {
  const weights = data.weights[layer][head];
  const rows = data.query_words.length, cols = data.key_words.length, cell = options.cell;
  const longest = words => Math.max(1, ...words.map(w => w.length));
  const left = options.labels ? 10 + 7 * Math.min(longest(data.query_words), 24) : 0;
  const bottom = options.labels ? 10 + 5 * Math.min(longest(data.key_words), 24) : 0;
  const svg = svgElement("svg", { class: "heatmap" + (options.labels ? " large" : " mini"),
    width: left + cols * cell + 2, height: rows * cell + bottom + 2, "data-layer": layer, "data-head": head });
  const cells = svgElement("g", { transform: "translate(" + (left + 1) + ",1)" });
  for (let q = 0; q < rows; q++) {
    for (let k = 0; k < cols; k++) {
      const w = weights[q][k];
      const rect = svgElement("rect", { class: "cell", x: k * cell, y: q * cell, width: cell, height: cell,
        fill: weightColor(w, data.scale), "data-q": q, "data-k": k, "data-weight": w });
      cells.appendChild(rect);
      if (options.labels && cell >= 26)
        cells.appendChild(svgElement("text", { class: "cell-value", x: k * cell + cell / 2, y: q * cell + cell / 2,
          fill: (data.scale && data.scale.signed ? Math.abs(w) < 0.6 * data.scale.vmax : w > 0.6) ? "#222" : "#fff" },
          formatWeight(w)));
    }
  }
  cells.addEventListener("mouseover", event => {
    const q = event.target.getAttribute("data-q");
    if (q === null) return;
    const k = Number(event.target.getAttribute("data-k"));
    options.onHover({ layer, head, q: Number(q), k, query: data.query_words[Number(q)], key: data.key_words[k],
      weight: weights[Number(q)][k] }, event);
  });
  cells.addEventListener("mouseleave", () => options.onLeave());
  svg.appendChild(cells);
  if (options.labels) {
    data.query_words.forEach((word, q) => svg.appendChild(svgElement("text",
      { class: "axis-word", x: left - 4, y: q * cell + cell / 2 + 1, "text-anchor": "end" }, word)));
    data.key_words.forEach((word, k) => {
      const x = left + 1 + k * cell + cell / 2, y = rows * cell + 8;
      svg.appendChild(svgElement("text", { class: "axis-word", x: x, y: y, "text-anchor": "end",
        transform: "rotate(-45 " + x + " " + y + ")" }, word));
    });
  }
  return svg;
}

// The side of a small map's cell: about 108 px a map, so that a stripe one cell wide reads at 12 words (9 px
// cells); never under 3 px, never over 18.
export function miniCell(size) {
  return Math.max(3, Math.min(18, Math.floor(108 / size)));
}

// The side of the enlarged map's cell: about 300 px a map, 14 to 30 px a cell (its value is written from 26 px).
export function largeCell(size) {
  return Math.max(14, Math.min(30, Math.floor(300 / size)));
}

// Every layer and head: a table of small maps; clicking one selects it, and ★ marks the best head of the step.
// options: {selected, best: {layer, head, kind, score} or null, onSelect, onHover, onLeave}
export function mapsGrid(data, options) {
  const layers = data.weights.length, heads = data.weights[0].length;
  const size = Math.max(data.query_words.length, data.key_words.length);
  const cell = miniCell(size);
  const table = document.createElement("table");
  table.className = "maps-grid";
  const header = table.createTHead().insertRow();
  header.appendChild(document.createElement("th"));
  for (let h = 0; h < heads; h++) {
    const th = document.createElement("th");
    th.textContent = "head " + h;
    header.appendChild(th);
  }
  const body = table.createTBody();
  for (let l = 0; l < layers; l++) {
    const row = body.insertRow();
    const th = document.createElement("th");
    th.textContent = "layer " + l;
    row.appendChild(th);
    for (let h = 0; h < heads; h++) {
      const td = row.insertCell();
      const button = document.createElement("button");
      button.type = "button";
      button.className = "mini-map";
      const best = options.best && options.best.layer === l && options.best.head === h;
      button.title = "layer " + l + ", head " + h + ": click to enlarge" +
        (best ? " · ★ the best " + options.best.kind + " head at this step" : "");
      button.dataset.layer = l; button.dataset.head = h;
      button.classList.toggle("selected", options.selected.layer === l && options.selected.head === h);
      button.classList.toggle("best", Boolean(best));
      button.appendChild(heatmap(data, l, h, { cell, labels: false, onHover: options.onHover, onLeave: options.onLeave }));
      button.addEventListener("click", () => options.onSelect(l, h));
      td.appendChild(button);
    }
  }
  return table;
}

export function describeCell(info) {
  return "layer " + info.layer + " · head " + info.head + " · query “" + info.query + "” → key “" + info.key +
    "” · weight " + formatWeight(info.weight);
}
