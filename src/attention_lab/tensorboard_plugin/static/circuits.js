// The circuits of one run, in a collapsed section below its maps: first a clean / corrupted pair, patched head by
// head (filled in with an example pair of the run's own that changes the model's prediction, which the
// example_pair route finds); at the slider's step the composition scores between layers, the copying scores and
// the patching recovery (logged scalars) and the strongest paths of the path patching as a graph of heads
// (paths.js), with the loss by target index over every step; for the enlarged head its QK and OV word tables from
// the checkpoint; for a typed sentence the direct logit attribution of every head.
// Words and values are set with textContent only. Each view's element has data-view; a value cell has data-value.
// Every table and the heatmap download as SVG, PNG and CSV (export.js).

import { addTableLinks, fileName, lossByIndexLinks, tableLinks, wordTableLinks } from "./export.js";
import { weightColor } from "./heatmaps.js";
import { pathGraph } from "./paths.js";
import { formatValue } from "./scores.js";
import { mapsStepOf, section, stepWords } from "./steps.js";

const UNIT = { vmin: 0, vmax: 1, signed: false };

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function signedScale(values) {
  const top = Math.max(1e-9, ...values.filter(v => v !== null).map(Math.abs));
  return { vmin: -top, vmax: top, signed: true };
}

function textColour(value, scale) {
  if (value === null) return "#222";
  return (scale.signed ? Math.abs(value) < 0.6 * scale.vmax : (value - scale.vmin) / (scale.vmax - scale.vmin) > 0.6)
    ? "#222" : "#fff";
}

// A table of coloured values: rows x columns, with an optional last column (e.g. the whole layer).
function valueTable({ view, caption, title, rows, columns, cells, scale, last }) {
  const table = element("table", "circuit-grid");
  table.dataset.view = view;
  const captionNode = table.createCaption();
  captionNode.textContent = caption;
  if (title) captionNode.title = title;
  const header = table.createTHead().insertRow();
  header.appendChild(element("th", "", ""));
  for (const column of columns) header.appendChild(element("th", "", column));
  if (last) header.appendChild(element("th", "", last.label));
  const body = table.createTBody();
  cells.forEach((row, r) => {
    const tr = body.insertRow();
    tr.appendChild(element("th", "", rows[r]));
    for (const value of last ? [...row, last.values[r]] : row) {
      const td = element("td", "score", value === null || value === undefined ? "–" : formatValue(value, 2));
      const shown = value === undefined ? null : value;
      td.dataset.value = shown === null ? "" : String(shown);
      td.style.background = shown === null ? "#eee" : weightColor(shown, scale);
      td.style.color = textColour(shown, scale);
      tr.appendChild(td);
    }
  });
  return table;
}

const heads = count => Array.from({ length: count }, (_, h) => "h" + h);
const layers = count => Array.from({ length: count }, (_, l) => "layer " + l);
// A table's tooltip: its description, and the step the Scalars tab shows it at where that is another.
const described = grid => grid.description + (grid.logged_step !== undefined && grid.logged_step !== grid.step
  ? " (the validation after step " + grid.step + ", which Lightning logs at step " + grid.logged_step + ")" : "");

function compositionTables(grids, own) {
  return grids.map(g => valueTable({ view: "composition", caption: g.kind.toUpperCase() + "-composition L" +
      g.writer_layer + " → L" + g.reader_layer + own(g.step), title: described(g) + "; rows: heads of layer " +
      g.writer_layer + " (writers), columns: heads of layer " + g.reader_layer + " (readers)",
    rows: heads(g.cells.length).map(h => "L" + g.writer_layer + " " + h), columns: heads(g.cells[0].length),
    cells: g.cells, scale: UNIT }));
}

// Step x target index: the loss falling in the later targets is the induction heads forming (Olsson et al.).
// Rows go down in training order, each labelled with the step of the maps it belongs to (steps.js: a validation
// logged at n - 1 is that of step n); mapsSteps: the run's map steps.
function lossByIndex(data, step, label, mapsSteps) {
  const values = data.values.flat().filter(v => v !== null);
  const low = values.length ? Math.min(...values) : 0;  // every value missing (NaN): an empty 0..1 scale
  const scale = { vmin: low, vmax: Math.max(low + 1e-9, ...values), signed: false, label: "loss" };
  const box = element("figure", "loss-by-index");
  box.dataset.view = "loss-by-index";
  box.appendChild(element("figcaption", "", "Loss by target index (rows: steps, first at the top)")).title =
    data.description;
  const rowSteps = data.steps.map(s => mapsStepOf(s, mapsSteps));
  const cellW = Math.max(8, Math.min(24, Math.floor(240 / data.indices)));
  const cellH = Math.max(2, Math.min(14, Math.floor(220 / data.steps.length)));
  const left = 48, top = 14;
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("width", left + data.indices * cellW + 4);
  svg.setAttribute("height", top + data.steps.length * cellH + 4);
  const add = (name, attrs, text) => {
    const node = document.createElementNS("http://www.w3.org/2000/svg", name);
    for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
    if (text !== undefined) node.textContent = text;
    svg.appendChild(node);
    return node;
  };
  // the row of the maps' step: the last logged at or before it (a validation is logged one step before its maps)
  const current = data.steps.reduce((found, s, i) => (s <= step ? i : found), -1);
  data.steps.forEach((s, row) => data.values[row].forEach((value, index) => {
    const rect = add("rect", { class: "cell", x: left + index * cellW, y: top + row * cellH, width: cellW, height: cellH,
      fill: value === null ? "#eee" : weightColor(value, scale), "data-step": s, "data-index": index,
      "data-value": value === null ? "" : value });
    const tip = document.createElementNS("http://www.w3.org/2000/svg", "title");
    tip.textContent = "step " + rowSteps[row] + " · target " + index + " · loss " +
      (value === null ? "–" : formatValue(value, 3));
    rect.appendChild(tip);
  }));
  for (let index = 0; index < data.indices; index += Math.max(1, Math.ceil(data.indices / 8)))
    add("text", { class: "axis", x: left + index * cellW + cellW / 2, y: 10, "text-anchor": "middle" }, String(index));
  add("text", { class: "axis row-step", x: left - 4, y: top + cellH / 2, "text-anchor": "end" }, "step " + rowSteps[0]);
  if (data.steps.length > 1)  // the first and last rows' steps, each at the middle of its row
    add("text", { class: "axis row-step", x: left - 4, y: top + (data.steps.length - 0.5) * cellH, "text-anchor": "end" },
        "step " + rowSteps[rowSteps.length - 1]);
  if (current >= 0)
    add("rect", { class: "current-step", x: left - 1, y: top + current * cellH - 1, width: data.indices * cellW + 2,
      height: cellH + 2, "data-step": data.steps[current] });
  box.appendChild(svg);
  box.appendChild(element("p", "note", "loss " + formatValue(scale.vmin, 2) + " (dark) to " + formatValue(scale.vmax, 2) +
    " (light); outlined: the slider's step"));
  box.appendChild(lossByIndexLinks(svg, data, scale, label, "step " + step));
  return box;
}

// rows: {word, top: [[word, value], ...]}; exported: {axes, name, title} of its downloads
function wordTable(view, caption, rows, exported) {
  const box = element("div", "word-table");
  box.dataset.view = view;
  box.appendChild(element("p", "word-table-caption", caption));
  const scroll = element("div", "word-scroll");
  const table = element("table", "words");
  const body = table.createTBody();
  for (const row of rows) {
    const tr = body.insertRow();
    tr.appendChild(element("th", "", row.word));
    for (const [word, value] of row.top) {
      const td = element("td", word === row.word ? "self" : "", word + " " + (value === null ? "–" : formatValue(value, 2)));
      td.dataset.word = word;
      td.dataset.value = value === null ? "" : String(value);
      tr.appendChild(td);
    }
  }
  scroll.appendChild(table);
  box.append(scroll, wordTableLinks(table, rows, exported.axes, exported.name, exported.title));
  return box;
}

// The sentence's direct logit attribution at one position: a layers x heads grid and the rest.
function attributionView(data, position, onPosition, label) {
  const box = element("div", "attribution");
  box.dataset.view = "attribution";
  const picker = element("select", "attribution-position");
  picker.setAttribute("aria-label", "position");
  data.words.forEach((word, t) => picker.appendChild(new Option(t + ": " + word + " → " + data.predictions[t], String(t))));
  picker.value = String(position);
  picker.addEventListener("change", () => onPosition(Number(picker.value)));
  const cells = data.heads.map(layer => layer.map(share => share[position]));
  const scale = signedScale(cells.flat());
  const word = data.words[position], predicted = data.predictions[position];
  const grid = valueTable({ view: "attribution-grid", caption: "each head's share of the logit of “" + predicted + "”",
    title: "the head's output through out_proj, the final LayerNorm (linearised with this sentence's scale) and " +
      "the unembedding, at the predicted word", rows: layers(cells.length), columns: heads(cells[0].length), cells,
    scale });
  box.append(element("span", "", "Direct logit attribution at "), picker,
    tableLinks(grid, fileName(label, "sentence", "attribution", "position" + position, word), label + " · “" +
      data.words.join(" ") + "” · direct logit attribution after word " + position + " “" + word + "” → “" + predicted +
      "”: each head's share of that logit"),
    element("p", "attribution-sum", "logit " + formatValue(data.logit[position], 3) + " = heads " +
      formatValue(data.logit[position] - data.rest[position], 3) + " + rest " + formatValue(data.rest[position], 3) +
      " (embeddings, biases, MLPs)"));
  return box;
}

function pairView(data, label) {
  const box = element("div", "pair-result");
  box.appendChild(element("p", "pair-summary", "clean → “" + data.clean_prediction + "”, corrupted → “" +
    data.corrupted_prediction + "”; logit difference " + formatValue(data.clean_diff, 3) + " clean, " +
    formatValue(data.corrupted_diff, 3) + " corrupted"));
  const grid = valueTable({ view: "pair-patching", caption: "fraction restored by the head's clean output",
    title: "(patched − corrupted) / (clean − corrupted) of logit(clean prediction) − logit(corrupted prediction) " +
      "after the last word", rows: layers(data.cells.length), columns: heads(data.cells[0].length), cells: data.cells,
    scale: { vmin: -1, vmax: 1, signed: true }, last: { label: "all", values: data.whole_layer } });
  box.appendChild(tableLinks(grid, fileName(label, "patching", data.clean_prediction + " vs " +
    data.corrupted_prediction), label + " · patching “" + data.clean_words.join(" ") + "” → “" + data.clean_prediction +
    "” into “" + data.corrupted_words.join(" ") + "” → “" + data.corrupted_prediction +
    "”: the fraction each head's clean output restores"));
  return box;
}

// run: the run's name; api: {get(route, params) -> Promise<{ok, data}>}; label: the run's label (the downloads' names)
export function createCircuits(run, api, label) {
  const { details: root, step: stepWordsNode } = section("circuits",
    "Circuits: patching, paths, composition, copying, loss by index, word tables");
  const logged = element("div", "row circuits-logged");
  const head = element("div", "circuits-head");
  const sentence = element("div", "circuits-sentence");
  const form = element("form", "pair-form");
  const clean = element("input", "pair-clean");
  const corrupted = element("input", "pair-corrupted");
  clean.placeholder = "clean sentence"; corrupted.placeholder = "corrupted: one word changed";
  clean.setAttribute("aria-label", "clean sentence"); corrupted.setAttribute("aria-label", "corrupted sentence");
  const patch = element("button", "pair-run", "Patch every head");
  patch.type = "submit";
  form.append(element("span", "", "Patching a pair:"), clean, corrupted, patch);
  const example = element("p", "pair-example note");  // what the example pair filled in does, or why none
  const pair = element("div", "pair-box");
  pair.dataset.view = "pair";
  root.append(form, example, pair, logged, head, sentence);
  const state = { step: null, head: null, request: 0, headRequest: 0, sentenceRequest: 0, tables: new Map(),
                  mapsSteps: [], typed: false };
  for (const input of [clean, corrupted]) input.addEventListener("input", () => { state.typed = true; });

  const note = text => element("p", "note", text);

  async function showStep(step) {
    const request = ++state.request;
    const reply = await api.get("circuits", { run, step });
    if (request !== state.request) return;
    if (!reply.ok) { logged.replaceChildren(note(reply.data.error)); return; }
    const data = reply.data, views = [];
    const grids = [...data.composition, data.copying, data.patching, data.paths].filter(Boolean);
    const words = stepWords(step, grids.map(g => g.step)), own = words.own;
    stepWordsNode.textContent = grids.length ? " · " + words.summary : "";
    if (data.composition.length) {
      const box = element("div", "composition");
      box.append(element("p", "circuit-caption", "Composition (0..1)"), ...compositionTables(data.composition, own));
      views.push(box);
    }
    if (data.copying) views.push(valueTable({ view: "copying", caption: "Copying" + own(data.copying.step),
      title: described(data.copying), rows: layers(data.copying.cells.length), columns: heads(data.copying.cells[0].length),
      cells: data.copying.cells, scale: { vmin: -1, vmax: 1, signed: true } }));
    if (data.patching) views.push(valueTable({ view: "patching", caption: "Patching recovery" + own(data.patching.step),
      title: described(data.patching), rows: layers(data.patching.cells.length),
      columns: heads(data.patching.cells[0].length), cells: data.patching.cells, scale: { vmin: -1, vmax: 1, signed: true },
      last: { label: "all", values: data.patching.whole_layer } }));
    if (data.paths) views.push(pathGraph(data.paths, own(data.paths.step), described(data.paths), label));
    if (data.loss_by_index) views.push(lossByIndex(data.loss_by_index, step, label, state.mapsSteps));
    logged.replaceChildren(...(views.length ? views
      : [note("no composition, copying, patching, path or loss-by-index scalars logged at or before this step")]));
    addTableLinks(logged, label);
    root.dataset.step = String(step);
  }

  async function showHead(layer, headIndex) {
    const key = layer + "/" + headIndex;
    if (state.head === key) return;
    state.head = key;
    const request = ++state.headRequest;
    head.dataset.state = "loading";
    if (!state.tables.has(key)) state.tables.set(key, api.get("head_circuit", { run, layer, head: headIndex }));
    const reply = await state.tables.get(key);
    if (request !== state.headRequest) return;
    if (!reply.ok) { state.tables.delete(key); head.replaceChildren(note(reply.data.error)); head.dataset.state = "message"; return; }
    const d = reply.data;
    const cut = d.rows < d.vocab_size ? " (the first " + d.rows + " of " + d.vocab_size + " words)" : "";
    head.replaceChildren(element("p", "circuit-caption", "Word tables of layer " + d.layer + ", head " + d.head +
      " (" + d.checkpoint + ", step " + d.step + "): top " + d.k + " words a row" + cut),
      element("div", "row", undefined));
    const exported = (kind, axes, caption) => ({ axes, name: fileName(label, "step " + d.step, "layer" + d.layer,
      "head" + d.head, kind + "-words"), title: label + " · layer " + d.layer + ", head " + d.head + " (" +
      d.checkpoint + ", step " + d.step + ") · " + caption });
    const qk = "QK: query word → the key words it looks for";
    const ov = "OV: attended word → the words it makes the head predict (bold: itself)";
    head.lastChild.append(wordTable("qk-table", qk, d.qk, exported("qk", ["query word", "key word"], qk)),
      wordTable("ov-table", ov, d.ov, exported("ov", ["attended word", "output word"], ov)));
    head.dataset.state = "tables";
    head.dataset.head = key;
  }

  async function showSentence(text) {
    const request = ++state.sentenceRequest;
    const reply = await api.get("attribution", { run, text });
    if (request !== state.sentenceRequest) return;
    if (!reply.ok) { sentence.replaceChildren(note(reply.data.error)); return; }
    const draw = position => sentence.replaceChildren(attributionView(reply.data, position, draw, label));
    draw(reply.data.words.length - 1);
  }

  form.addEventListener("submit", async event => {
    event.preventDefault();
    if (!clean.value.trim() || !corrupted.value.trim()) return;
    pair.dataset.state = "loading";
    const reply = await api.get("patch_pair", { run, clean: clean.value, corrupted: corrupted.value });
    pair.replaceChildren(reply.ok ? pairView(reply.data, label) : note(reply.data.error));
    pair.dataset.state = reply.ok ? "patched" : "message";
  });

  // The example pair for the run's probe (text), filled in unless a pair was typed already.
  async function showExample(text) {
    form.dataset.state = "loading";
    const reply = await api.get("example_pair", { run, text });
    form.dataset.state = "ready";
    const found = reply.ok ? reply.data.pair : null;
    if (!found) { example.textContent = reply.ok ? reply.data.reason : ""; return; }  // a snapshot has no checkpoint
    if (!state.typed) { clean.value = found.clean; corrupted.value = found.corrupted; }
    const from = found.clean.split(" ")[found.position], to = found.corrupted.split(" ")[found.position];
    example.textContent = "Example from the run's probe: “" + from + "” → “" + to + "” changes the model's prediction " +
      "after the last word from “" + found.clean_prediction + "” to “" + found.corrupted_prediction + "”; patching " +
      "shows which heads carry the difference.";
  }

  return {
    root, showStep, showHead, showSentence, showExample,
    setSteps(steps) { state.mapsSteps = steps; },
    clearSentence() { state.sentenceRequest++; sentence.replaceChildren(); },
  };
}
