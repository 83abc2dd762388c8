// Downloads of the tab's maps and tables as SVG, PNG and CSV, made in the page from the data it already shows
// (nothing is asked of the server, so the offline snapshot exports the same way). An SVG is the tab's own drawing
// (heatmaps.js) with the style it takes from style.css written into it; a PNG is that SVG drawn on a canvas; a CSV
// holds the numbers as the page received them, with the words as headers. Words are set with textContent only.

import { heatmap, largeCell, scaleLegend } from "./heatmaps.js";

const SVG_NS = "http://www.w3.org/2000/svg";
const FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif";
// The rules of style.css an exported drawing needs: outside the page its classes have no style. No rule sets the
// fill of every text: a rule would win over the fill a cell's value is drawn with (white on a dark cell).
const SVG_STYLE = "text { font-family: " + FONT + "; } .title { font-size: 13px; font-weight: 600; } " +
  ".axis-word { font-size: 12px; dominant-baseline: middle; } .legend-end, .legend-label { font-size: 11px; } " +
  ".cell-value { font-size: 10px; text-anchor: middle; dominant-baseline: middle; } " +
  ".grid-label { font-size: 11px; fill: #666; } .table-value { font-size: 11px; text-anchor: middle; " +
  "dominant-baseline: middle; }";
const TITLE_H = 24, GAP = 8, PNG_SCALE = 2;

function svgNode(name, attrs, text) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

// ------------------------------------------------------------------------------------------------------- CSV

// A spreadsheet reads a cell that starts with = + - @ (or a tab or carriage return) as a formula: a word that does
// is written with a leading ' (numbers are written as numbers).
function csvField(value) {
  if (value === null || value === undefined) return "";
  if (typeof value === "number") return Number.isFinite(value) ? String(value) : "";
  let text = String(value);
  if (/^[=+\-@\t\r]/.test(text)) text = "'" + text;
  return /[",\r\n]/.test(text) ? '"' + text.replaceAll('"', '""') + '"' : text;
}

// rows: arrays of words and numbers -> RFC 4180 text (CRLF line ends; null: an empty field).
export function csvText(rows) {
  return rows.map(row => row.map(csvField).join(",")).join("\r\n") + "\r\n";
}

// One head's map: a header of key words, then one row per query word.
export function mapCsv(data, layer, head) {
  return csvText([[data.query_axis + " \\ key", ...data.key_words],
    ...data.query_words.map((word, q) => [word, ...data.weights[layer][head][q]])]);
}

// Every layer and head: one row per weight.
export function allMapsCsv(data) {
  const rows = [["layer", "head", data.query_axis + " index", data.query_axis, "key index", "key", "weight"]];
  data.weights.forEach((heads, l) => heads.forEach((rowsOfHead, h) => rowsOfHead.forEach((row, q) =>
    row.forEach((w, k) => rows.push([l, h, q, data.query_words[q], k, data.key_words[k], w])))));
  return csvText(rows);
}

// A scores route grid ({cells, whole_layer}): layers down, heads across, the whole layer in a last column.
export function gridCsv(grid) {
  const heads = grid.cells.length ? grid.cells[0].length : 0;
  const withLayer = grid.whole_layer.some(v => v !== null);
  const header = ["layer", ...Array.from({ length: heads }, (_, h) => "head " + h), ...(withLayer ? ["all"] : [])];
  return csvText([header, ...grid.cells.map((row, l) => [l, ...row, ...(withLayer ? [grid.whole_layer[l]] : [])])]);
}

// A table of values drawn by another view (circuits.js: table.circuit-grid), each cell's number in data-value:
// its header row, then one row per row label.
export function domTableCsv(table) {
  return csvText([...table.querySelectorAll("tr")].map(tr => [...tr.children].map(cell =>
    cell.tagName === "TD" ? (cell.dataset.value === "" ? null : Number(cell.dataset.value)) : cell.textContent)));
}

// The loss by target index ({steps, indices, values} of the circuits route): a header of target indices, then
// one row per logged step.
export function lossByIndexCsv(data) {
  return csvText([["step \\ target index", ...Array.from({ length: data.indices }, (_, i) => i)],
    ...data.steps.map((step, row) => [step, ...data.values[row]])]);
}

// A word table of one head ({word, top: [[word, value], ...]} a row): a row of the table a row, its top words and
// their values side by side.
export function wordTableCsv(rows, rowAxis, topAxis) {
  const k = Math.max(0, ...rows.map(row => row.top.length));
  const header = [rowAxis,
    ...Array.from({ length: k }, (_, i) => [topAxis + " " + (i + 1), "value " + (i + 1)]).flat()];
  return csvText([header, ...rows.map(row => [row.word, ...row.top.flat()])]);
}

// The paths drawn, strongest first: each head as layer{l}/head{h}, the logits as "logits".
export function pathGraphCsv(data) {
  const head = node => "layer" + node[0] + "/head" + node[1];
  return csvText([["sender", "receiver", "kind", "value"], ...data.edges.map(e =>
    [head(e.sender), e.receiver ? head(e.receiver) : "logits", e.receiver ? e.kind : "direct", e.value])]);
}

// ------------------------------------------------------------------------------------------------------- SVG

// parts: SVG drawings stacked under a title, on white, as one standalone SVG document.
function composed(title, parts) {
  const sizes = parts.map(p => [Number(p.getAttribute("width")), Number(p.getAttribute("height"))]);
  const width = Math.ceil(Math.max(8 + 8.5 * title.length, ...sizes.map(s => s[0]))) + 8;  // 13px bold: < 8.5px a letter
  const height = TITLE_H + sizes.reduce((sum, s) => sum + s[1] + GAP, 0);
  const svg = svgNode("svg", { xmlns: SVG_NS, width, height, viewBox: "0 0 " + width + " " + height });
  svg.append(svgNode("style", {}, SVG_STYLE), svgNode("rect", { class: "background", x: 0, y: 0, width, height,
    fill: "#fff" }), svgNode("text", { class: "title", x: 4, y: 16 }, title));
  let y = TITLE_H;
  parts.forEach((part, i) => {
    part.setAttribute("x", 4);
    part.setAttribute("y", y);
    svg.appendChild(part);
    y += sizes[i][1] + GAP;
  });
  return new XMLSerializer().serializeToString(svg);
}

const quiet = { onHover() {}, onLeave() {} };

// One head's map with its words and the colour scale, as the tab enlarges it.
export function mapSvg(data, layer, head, title) {
  const size = Math.max(data.query_words.length, data.key_words.length);
  const map = heatmap(data, layer, head, { ...quiet, cell: largeCell(size), labels: true });
  return composed(title, [map, scaleLegend(data.scale)]);
}

// Every layer and head as small maps (layers down, heads across) and the colour scale.
export function allMapsSvg(data, title) {
  const layers = data.weights.length, heads = data.weights[0].length;
  const size = Math.max(data.query_words.length, data.key_words.length);
  const cell = Math.max(4, Math.min(12, Math.floor(96 / size))), side = size * cell + 2, left = 52, top = 16;
  const grid = svgNode("svg", { width: left + heads * (side + GAP), height: top + layers * (side + GAP) });
  for (let h = 0; h < heads; h++)
    grid.appendChild(svgNode("text", { class: "grid-label", x: left + h * (side + GAP), y: 11 }, "head " + h));
  for (let l = 0; l < layers; l++) {
    grid.appendChild(svgNode("text", { class: "grid-label", x: 0, y: top + l * (side + GAP) + side / 2 },
      "layer " + l));
    for (let h = 0; h < heads; h++) {
      const map = heatmap(data, l, h, { ...quiet, cell, labels: false });
      map.setAttribute("x", left + h * (side + GAP));
      map.setAttribute("y", top + l * (side + GAP));
      grid.appendChild(map);
    }
  }
  return composed(title, [grid, scaleLegend(data.scale)]);
}

// A table as the tab draws it (table.score-grid of scores.js, table.circuit-grid and table.words of circuits.js):
// its cells' colours, weights and text, each column as wide as its longest text.
export function tableSvg(table, title) {
  const rows = [...table.querySelectorAll("tr")].map(tr => [...tr.children]);
  const columns = Math.max(...rows.map(r => r.length)), cellH = 20;
  const widths = Array.from({ length: columns }, (_, c) => Math.max(c === 0 ? 56 : 46,  // 11px text: < 7px a letter
    ...rows.map(r => (r[c] ? 8 + 7 * r[c].textContent.length : 0))));
  const lefts = widths.map((_, c) => widths.slice(0, c).reduce((sum, w) => sum + w, 0));
  const drawing = svgNode("svg", { width: lefts[columns - 1] + widths[columns - 1], height: rows.length * cellH });
  rows.forEach((cells, r) => cells.forEach((cell, c) => {
    const x = lefts[c], y = r * cellH, w = widths[c];
    if (cell.tagName === "TD") {
      const style = getComputedStyle(cell);
      const fill = style.backgroundColor === "rgba(0, 0, 0, 0)" ? "none" : style.backgroundColor;  // transparent
      drawing.appendChild(svgNode("rect", { class: "cell", x, y, width: w - 1, height: cellH - 1, fill }));
      drawing.appendChild(svgNode("text", { class: "table-value", x: x + w / 2, y: y + cellH / 2,
        style: "fill: " + style.color + "; font-weight: " + style.fontWeight }, cell.textContent));
    } else {
      drawing.appendChild(svgNode("text", { class: "grid-label", x: c === 0 ? x : x + w / 2, y: y + cellH / 2 + 4,
        "text-anchor": c === 0 ? "start" : "middle" }, cell.textContent));
    }
  }));
  return composed(title, [drawing]);
}

// The loss-by-index heatmap of circuits.js as drawn (steps down, target indices across, the slider's step
// outlined) with its colour scale.
const LOSS_STYLE = ".axis { font-size: 10px; fill: #666; dominant-baseline: middle; } " +
  ".current-step { fill: none; stroke: #d62728; stroke-width: 1.5; }";

export function lossByIndexSvg(drawing, scale, title) {
  const copy = drawing.cloneNode(true);
  copy.prepend(svgNode("style", {}, LOSS_STYLE));
  return composed(title, [copy, scaleLegend(scale)]);
}

// The path graph of paths.js as drawn (its nodes, its edges and their labels).
const PATH_STYLE = ".path-node rect { fill: #f5f5f5; stroke: #888; } .path-node text, .path-label { font-size: 11px; " +
  "dominant-baseline: middle; } .path-node text { fill: #222; } .path-label { paint-order: stroke; stroke: #fff; " +
  "stroke-width: 3px; }";

export function pathGraphSvg(drawing, title) {
  const copy = drawing.cloneNode(true);
  copy.prepend(svgNode("style", {}, PATH_STYLE));
  return composed(title, [copy]);
}

// The head view as drawn now (svg.head-view of head_view.js: its layer, its heads, no word hovered).
const HEAD_VIEW_STYLE = "svg text { font-size: 14px; dominant-baseline: middle; } .column-title { font-size: 11px; " +
  "fill: #777; } .weight-label { font-size: 11px; } .token-bg { fill: transparent; } line.attn { stroke-width: 2.5; } " +
  "line.attn.hidden { display: none; }";

export function headViewSvg(view, title) {
  const copy = view.cloneNode(true);
  copy.querySelectorAll(".weight-label").forEach(node => node.remove());
  copy.querySelectorAll(".active, .hidden").forEach(node => node.classList.remove("active", "hidden"));
  copy.prepend(svgNode("style", {}, HEAD_VIEW_STYLE));
  return composed(title, [copy]);
}

// The lines of the head view: one row per (head, query, key) drawn.
export function headViewCsv(view, data) {
  const rows = [["head", data.query_axis + " index", data.query_axis, "key index", "key", "weight"]];
  for (const line of view.querySelectorAll("line.attn")) {
    const q = Number(line.dataset.q), k = Number(line.dataset.k), w = Number(line.dataset.weight);
    rows.push([Number(line.dataset.head), q, data.query_words[q], k, data.key_words[k], Number.isFinite(w) ? w : null]);
  }
  return csvText(rows);
}

// ------------------------------------------------------------------------------------------------------- PNG

// The SVG drawn on a canvas at twice its size, on white.
export function pngBlob(svgText) {
  return new Promise((resolve, reject) => {
    const url = URL.createObjectURL(new Blob([svgText], { type: "image/svg+xml" }));
    const image = new Image();
    image.onload = () => {
      const canvas = document.createElement("canvas");
      canvas.width = Math.ceil(image.width * PNG_SCALE);
      canvas.height = Math.ceil(image.height * PNG_SCALE);
      const context = canvas.getContext("2d");
      context.fillStyle = "#fff";
      context.fillRect(0, 0, canvas.width, canvas.height);
      context.drawImage(image, 0, 0, canvas.width, canvas.height);
      URL.revokeObjectURL(url);
      canvas.toBlob(blob => (blob ? resolve(blob) : reject(new Error("the canvas gave no PNG"))), "image/png");
    };
    image.onerror = () => { URL.revokeObjectURL(url); reject(new Error("the SVG could not be drawn")); };
    image.src = url;
  });
}

// ------------------------------------------------------------------------------------------------------- links

// A file name from the parts that say what it shows: letters, digits, '.', '_', '-' and '='.
export function fileName(...parts) {
  return parts.map(p => String(p).replace(/[^A-Za-z0-9._=-]+/g, "-").replace(/^-+|-+$/g, "")).filter(Boolean)
    .join("_").slice(0, 150) || "attention";
}

function download(blob, name) {
  const url = URL.createObjectURL(blob);
  const link = document.createElement("a");
  link.href = url;
  link.download = name;
  link.hidden = true;
  document.body.appendChild(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);  // the download has read it by then
}

// "SVG · PNG · CSV" buttons that download ``name``.svg/.png/.csv; make: {svg(), csv()} build the texts when clicked.
export function exportLinks(name, make) {
  const box = document.createElement("div");
  box.className = "export-links";
  const formats = [
    ["svg", () => new Blob([make.svg()], { type: "image/svg+xml" })],
    ["png", () => pngBlob(make.svg())],
    ["csv", () => new Blob([make.csv()], { type: "text/csv" })],
  ];
  formats.forEach(([format, blob], i) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "export-link";
    button.dataset.format = format;
    button.textContent = format.toUpperCase();
    button.title = "download " + name + "." + format;
    button.addEventListener("click", async () => {
      try {
        download(await blob(), name + "." + format);
        box.removeAttribute("data-error");
      } catch (err) {
        box.dataset.error = err.message;
        button.title = "could not export: " + err.message;
      }
    });
    if (i) box.append(" · ");
    box.appendChild(button);
  });
  return box;
}

// The links under every layer's and head's map (all of them), under the enlarged map (its head), under the head
// view, under each score table and each logged circuit table. what: "step 20" or "sentence"; label: the run's label.
export function gridLinks(data, label, what) {
  return exportLinks(fileName(label, what, "all-heads"),
    { svg: () => allMapsSvg(data, label + " · " + what + " · every layer and head"), csv: () => allMapsCsv(data) });
}

export function mapLinks(data, layer, head, label, what) {
  return exportLinks(fileName(label, what, "layer" + layer, "head" + head),
    { svg: () => mapSvg(data, layer, head, label + " · " + what + " · layer " + layer + ", head " + head),
      csv: () => mapCsv(data, layer, head) });
}

// view: the head view's svg; status: its status line ("layer 1 of 2 · head 0 of 4 · ..."), read when clicked.
export function headViewLinks(view, status, data, label, what) {
  const shown = () => status.textContent.split(" · ").slice(0, 2).join(" · ");
  return exportLinks(fileName(label, what, "head-view"),
    { svg: () => headViewSvg(view, label + " · " + what + " · head view, " + shown()),
      csv: () => headViewCsv(view, data) });
}

// box: the element scoresView filled; reply: what the scores route answered.
export function addScoreLinks(box, reply, label) {
  for (const table of box.querySelectorAll("table.score-grid")) {
    const grid = reply.grids.find(g => g.family === table.dataset.family);
    if (!grid) continue;
    const title = label + " · " + grid.family + " · step " + grid.step;
    const wrap = document.createElement("div");  // the links under the table, in the row of tables
    table.replaceWith(wrap);
    wrap.append(table, exportLinks(fileName(label, "step " + grid.step, grid.family),
      { svg: () => tableSvg(table, title), csv: () => gridCsv(grid) }));
  }
}

// A table of circuits.js in a box with its links under it (in place, when the table is in the page already).
export function tableLinks(table, name, title) {
  const wrap = document.createElement("div");
  wrap.className = "exported";
  if (table.parentNode) table.replaceWith(wrap);
  wrap.append(table, exportLinks(name, { svg: () => tableSvg(table, title), csv: () => domTableCsv(table) }));
  return wrap;
}

// The circuits' tables of logged values (table.circuit-grid under ``box``) that have no links yet.
export function addTableLinks(box, label) {
  for (const table of box.querySelectorAll("table.circuit-grid")) {
    if (table.parentElement.classList.contains("exported")) continue;
    const caption = table.caption ? table.caption.textContent : "table";
    tableLinks(table, fileName(label, caption), label + " · " + caption);
  }
}

// The loss by index: svg, the drawing; data, what the circuits route answered for it; scale, its colours.
export function lossByIndexLinks(svg, data, scale, label, what) {
  return exportLinks(fileName(label, what, "loss-by-index"),
    { svg: () => lossByIndexSvg(svg, scale, label + " · loss by target index (rows: logged steps; outlined: " + what +
      ")"), csv: () => lossByIndexCsv(data) });
}

// A word table (table.words) of one head; rows: what the head_circuit route answered for it; axes: the names of
// its row words and of its top words.
export function wordTableLinks(table, rows, axes, name, title) {
  return exportLinks(name, { svg: () => tableSvg(table, title), csv: () => wordTableCsv(rows, ...axes) });
}

// The path graph: svg, the drawing; data, what the circuits route answered for it; what: "step 100".
export function pathGraphLinks(svg, data, label, what) {
  return exportLinks(fileName(label, what, "paths"), { svg: () => pathGraphSvg(svg, label + " · " + what +
    " · path patching: the " + data.edges.length + " strongest paths"), csv: () => pathGraphCsv(data) });
}
