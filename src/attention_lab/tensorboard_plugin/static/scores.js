// Head scores and ablation drops of one step as layers x heads tables, coloured by value; the whole-layer
// ablation in a last column. The step they were logged at is said once, by the section that holds them
// (steps.js); a table names its own step only where it differs. Values are set with textContent only.

import { weightColor } from "./heatmaps.js";
import { stepWords } from "./steps.js";

function ablationColor(value, scale) {  // white at 0, red for a larger harm, blue for a gain
  if (value === null) return "#eee";
  const t = Math.min(Math.abs(value) / (scale || 1), 1);
  const fade = c => Math.round(255 - (255 - c) * t);
  return value >= 0 ? "rgb(255," + fade(60) + "," + fade(60) + ")" : "rgb(" + fade(60) + "," + fade(110) + ",255)";
}

// A value to `decimals` places; one that rounds to zero prints as 0 (never -0.000).
export function formatValue(value, decimals) {
  const text = value.toFixed(decimals);
  return Number(text) === 0 ? "0" : text;
}

function scoreTable(grid, own) {
  const ablation = grid.family.startsWith("ablation/");
  const values = [...grid.cells.flat(), ...grid.whole_layer].filter(v => v !== null);
  const scale = Math.max(1e-9, ...values.map(Math.abs));
  const table = document.createElement("table");
  table.className = "score-grid";
  table.dataset.family = grid.family;
  const caption = table.createCaption();
  caption.textContent = grid.family + own(grid.step);
  caption.title = grid.description + (grid.logged_step !== undefined && grid.logged_step !== grid.step
    ? " (the validation after step " + grid.step + ", which Lightning logs at step " + grid.logged_step + ")" : "");
  const heads = grid.cells.length ? grid.cells[0].length : 0;
  const withLayer = grid.whole_layer.some(v => v !== null);
  const header = table.createTHead().insertRow();
  header.appendChild(document.createElement("th"));
  for (let h = 0; h < heads; h++) header.appendChild(Object.assign(document.createElement("th"), { textContent: "h" + h }));
  if (withLayer) header.appendChild(Object.assign(document.createElement("th"), { textContent: "all" }));
  const body = table.createTBody();
  grid.cells.forEach((row, layer) => {
    const tr = body.insertRow();
    tr.appendChild(Object.assign(document.createElement("th"), { textContent: "layer " + layer }));
    const cells = withLayer ? [...row, grid.whole_layer[layer]] : row;
    cells.forEach((value, h) => {
      const td = tr.insertCell();
      td.className = "score";
      td.dataset.layer = layer;
      td.dataset.head = h < heads ? h : "all";
      td.textContent = value === null ? "–" : formatValue(value, ablation ? 3 : 2);
      td.style.background = ablation ? ablationColor(value, scale) : (value === null ? "#eee" : weightColor(value));
      td.style.color = !ablation && value !== null && value < 0.6 ? "#fff" : "#222";
    });
  });
  return table;
}

// The line where scores and ablations disagree, with a "Why?" that opens on the explanation in place (an offline
// snapshot links to no docs page) and names the docs section that says more. reply: what /scores returns.
function redundancyNote(reply) {
  const note = document.createElement("div");
  note.className = "redundancy";
  note.setAttribute("role", "note");
  const why = document.createElement("details");
  why.className = "why";
  const summary = document.createElement("summary");
  summary.textContent = "Why?";
  const docs = document.createElement("code");
  docs.className = "docs-link";
  docs.textContent = reply.redundancy_docs;
  why.append(summary, reply.redundancy_why + " More: ", docs);
  note.append(reply.redundancy + " ", why);
  return note;
}

// The words after the scores section's title: the step of its tables (steps.js).
export function scoresStep(reply, mapsStep) {
  return stepWords(mapsStep, reply.grids.map(g => g.step)).summary;
}

// reply: what /scores returns (grids, and the redundancy line when there is one); mapsStep: the step of the maps
// beside them. No grids: a note says so.
export function scoresView(reply, mapsStep) {
  const grids = reply.grids;
  const box = document.createElement("div");
  box.className = "scores";
  if (reply.redundancy) box.appendChild(redundancyNote(reply));
  if (!grids.length) {
    box.appendChild(Object.assign(document.createElement("p"), { className: "note",
      textContent: "no head scores or ablation drops logged at or before this step" }));
    return box;
  }
  const own = stepWords(mapsStep, grids.map(g => g.step)).own;
  const families = [["head_score/", "Head scores (0..1)"], ["ablation/", "Ablation: change when the head is removed"]];
  for (const [prefix, title] of families) {
    const chosen = grids.filter(g => g.family.startsWith(prefix));
    if (!chosen.length) continue;
    box.appendChild(Object.assign(document.createElement("h4"), { textContent: title }));
    const row = document.createElement("div");
    row.className = "score-row";
    for (const grid of chosen) row.appendChild(scoreTable(grid, own));
    box.appendChild(row);
  }
  return box;
}
