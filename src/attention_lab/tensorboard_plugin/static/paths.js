// The path patching's graph in the circuits section: the strongest paths of one step (path_graph.py chooses them)
// as edges between heads. Plain SVG; words and values are set with textContent only. Its SVG · PNG · CSV links
// download the drawing and the paths drawn (export.js).

import { pathGraphLinks } from "./export.js";
import { formatValue } from "./scores.js";

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// Heads as nodes in layer columns, only those on a drawn path, and the logits last; each path an edge from its sender
// to its receiver's q, k or v input (or to the logits: direct), labelled with its kind and value, as wide as its
// |value| (red restores, blue dashed works against). A path past a column bends under its heads; a label that
// would cover one placed before (a stronger path's) moves up or down.
const KINDS = { q: -1, k: 0, v: 1 };  // parallel edges of one pair of heads bend apart

// data: the circuits route's paths; own: what the caption adds about its step; title: its tooltip; label: the run's
// label (the downloads' names).
export function pathGraph(data, own, title, label) {
  const box = element("figure", "path-graph");
  box.dataset.view = "paths";
  box.appendChild(element("figcaption", "", "Path patching: the " + data.edges.length + " strongest of " + data.paths +
    " paths (at most " + data.top + ", |value| ≥ " + data.threshold + ")" + own)).title = title;
  if (!data.edges.length) {
    box.appendChild(element("p", "note", "no path restores " + data.threshold + " or more of the logit difference"));
    return box;
  }
  const key = ([layer, head]) => layer + "/" + head;
  const columns = new Map();  // layer -> its heads on a drawn path, in order
  for (const e of data.edges) for (const node of [e.sender, e.receiver].filter(Boolean)) {
    const heads = columns.get(node[0]) || new Set();
    columns.set(node[0], heads.add(node[1]));
  }
  const layers = [...columns.keys()].sort((a, b) => a - b);
  const nodeW = 58, nodeH = 22, gapX = 150, rowH = 44, left = 4, top = 6;
  const rows = Math.max(...[...columns.values()].map(h => h.size));
  const place = new Map();
  layers.forEach((layer, c) => [...columns.get(layer)].sort((a, b) => a - b).forEach((head, r) =>
    place.set(key([layer, head]), { x: left + c * (nodeW + gapX), y: top + r * rowH, column: c })));
  const logits = { x: left + layers.length * (nodeW + gapX), y: top + (rows - 1) * rowH / 2, column: layers.length };
  const bottom = top + (rows - 1) * rowH + nodeH;  // a path past a column bends under its heads
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("width", logits.x + nodeW + 4);
  svg.setAttribute("height", bottom + (layers.length > 1 ? 60 : 8));
  const add = (parent, name, attrs, text) => {
    const node = document.createElementNS("http://www.w3.org/2000/svg", name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    parent.appendChild(node);
    return node;
  };
  const widest = Math.max(...data.edges.map(e => Math.abs(e.value)));
  const labels = [];  // the boxes of the labels placed: a later (weaker) path's label moves off them
  const edges = add(svg, "g", {}), texts = add(svg, "g", { class: "path-labels" });  // every label over every edge
  const free = (x, y, w) => !labels.some(b => Math.abs(b.x - x) < (b.w + w) / 2 && Math.abs(b.y - y) < 12);
  for (const e of data.edges) {
    const from = place.get(key(e.sender)), to = e.receiver ? place.get(key(e.receiver)) : logits;
    const kind = e.receiver ? e.kind : "direct";
    const x0 = from.x + nodeW, y0 = from.y + nodeH / 2, x1 = to.x, y1 = to.y + nodeH / 2;
    const bend = 16 * (e.receiver ? KINDS[e.kind] || 0 : 0), reach = (x1 - x0) / 2;
    const past = to.column - from.column > 1;
    const c0 = past ? [x0 + reach / 2, bottom + 40] : [x0 + reach, y0 + bend];
    const c1 = past ? [x1 - reach / 2, bottom + 40] : [x1 - reach, y1 + bend];
    const g = add(edges, "g", { class: "path-edge", "data-sender": key(e.sender),
      "data-receiver": e.receiver ? key(e.receiver) : "logits", "data-kind": kind, "data-value": e.value });
    const colour = e.value >= 0 ? "#c0392b" : "#1f77b4";
    add(g, "path", { d: "M" + x0 + "," + y0 + " C" + c0 + " " + c1 + " " + x1 + "," + y1, fill: "none",
      stroke: colour, "stroke-dasharray": e.value >= 0 ? "none" : "5 3",
      "stroke-width": (1 + 5 * Math.abs(e.value) / widest).toFixed(2), "stroke-opacity": 0.8 });
    const text = kind + " " + formatValue(e.value, 2), w = 6.5 * text.length;
    const mx = (x0 + 3 * c0[0] + 3 * c1[0] + x1) / 8, middle = (y0 + 3 * c0[1] + 3 * c1[1] + y1) / 8;
    const my = [0, 13, -13, 26, -26, 39, -39].map(d => middle + d).find(y => free(mx, y, w)) ?? middle;
    labels.push({ x: mx, y: my, w });
    add(texts, "text", { class: "path-label", x: mx, y: my, "text-anchor": "middle", fill: colour }, text);
    add(g, "title", {}, "L" + e.sender[0] + " H" + e.sender[1] + " → " +
      (e.receiver ? "L" + e.receiver[0] + " H" + e.receiver[1] + " " + kind : "logits (direct)") + ": " +
      formatValue(e.value, 3) + " of the logit difference");
  }
  const node = (at, text, name) => {
    const g = add(svg, "g", { class: "path-node", "data-node": name });
    add(g, "rect", { x: at.x, y: at.y, width: nodeW, height: nodeH, rx: 4 });
    add(g, "text", { x: at.x + nodeW / 2, y: at.y + nodeH / 2, "text-anchor": "middle" }, text);
  };
  for (const [name, at] of place) node(at, "L" + name.replace("/", " H"), name);
  node(logits, "logits", "logits");
  box.appendChild(svg);
  box.appendChild(element("p", "note", "edge width: |fraction of the logit difference the path restores|; red " +
    "restores it, blue (dashed) works against it"));
  box.appendChild(pathGraphLinks(svg, data, label, "step " + data.step));
  return box;
}
