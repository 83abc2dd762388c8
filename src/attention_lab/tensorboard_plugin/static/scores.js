// Head scores and ablation drops of one step as layers x heads tables, coloured by value; the whole-layer
// ablation in a last column. Values are set with textContent only.

import { weightColor } from "./heatmaps.js";

function ablationColor(value, scale) {  // white at 0, red for a larger harm, blue for a gain
  if (value === null) return "#eee";
  const t = Math.min(Math.abs(value) / (scale || 1), 1);
  const fade = c => Math.round(255 - (255 - c) * t);
  return value >= 0 ? "rgb(255," + fade(60) + "," + fade(60) + ")" : "rgb(" + fade(60) + "," + fade(110) + ",255)";
}

function scoreTable(grid) {
  const ablation = grid.family.startsWith("ablation/");
  const values = [...grid.cells.flat(), ...grid.whole_layer].filter(v => v !== null);
  const scale = Math.max(1e-9, ...values.map(Math.abs));
  const table = document.createElement("table");
  table.className = "score-grid";
  table.dataset.family = grid.family;
  const caption = table.createCaption();
  caption.textContent = grid.family + " · step " + grid.step;
  caption.title = grid.description;
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
      td.textContent = value === null ? "–" : value.toFixed(ablation ? 3 : 2);
      td.style.background = ablation ? ablationColor(value, scale) : (value === null ? "#eee" : weightColor(value));
      td.style.color = !ablation && value !== null && value < 0.6 ? "#fff" : "#222";
    });
  });
  return table;
}

// grids: what /scores returns; an empty list says so.
export function scoresView(grids) {
  const box = document.createElement("div");
  box.className = "scores";
  if (!grids.length) {
    box.appendChild(Object.assign(document.createElement("p"), { className: "note",
      textContent: "no head scores or ablation drops logged at or before this step" }));
    return box;
  }
  const families = [["head_score/", "Head scores (0..1)"], ["ablation/", "Ablation: change when the head is removed"]];
  for (const [prefix, title] of families) {
    const chosen = grids.filter(g => g.family.startsWith(prefix));
    if (!chosen.length) continue;
    box.appendChild(Object.assign(document.createElement("h4"), { textContent: title }));
    const row = document.createElement("div");
    row.className = "score-row";
    for (const grid of chosen) row.appendChild(scoreTable(grid));
    box.appendChild(row);
  }
  return box;
}
