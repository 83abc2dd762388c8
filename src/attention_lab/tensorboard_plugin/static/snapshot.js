// The offline snapshot of a run (scripts/snapshot.py): the tab's own panels and step slider over data written
// into the page, asked for through a `get` that answers the tab's routes from that data: no server, no network.

import { createControls } from "./controls.js";
import { createPanel } from "./panel.js";

// snapshot.runs[i]: {run, label, query_words, key_words, query_axis, maps: [{step, weights, scale}], scores: {step: reply},
//   circuits: {step: reply less its loss_by_index}, loss_by_index, clamp} (tensorboard_plugin/snapshot.py)
export function snapshotApi(snapshot) {
  const byRun = new Map(snapshot.runs.map(run => [run.run, run]));
  async function get(route, params) {
    const run = byRun.get(params && params.run);
    if (!run) return { ok: false, data: { error: "this snapshot holds no such run" } };
    const steps = run.maps.map(m => m.step);
    const wanted = params.step === undefined ? Infinity : Number(params.step);
    const chosen = [...run.maps].reverse().find(m => m.step <= wanted) || run.maps[0];
    if (route === "maps")
      return { ok: true, data: { run: run.run, steps, step: chosen.step, query_words: run.query_words,
        key_words: run.key_words, query_axis: run.query_axis, weights: chosen.weights, scale: chosen.scale,
        clamp: run.clamp || null } };
    if (route === "scores")
      return { ok: true, data: run.scores[String(chosen.step)] || { grids: [], focus: null, redundancy: null } };
    if (route === "circuits" && run.circuits[String(chosen.step)])
      return { ok: true, data: { ...run.circuits[String(chosen.step)], loss_by_index: run.loss_by_index } };
    return { ok: false, data: { error: "a snapshot holds the logged steps only: open the run in TensorBoard's " +
      "attention tab for this" } };
  }
  return { get };
}

export async function renderSnapshot(snapshot) {
  document.body.className = "attention-tab snapshot";
  const title = document.createElement("h2");
  title.className = "snapshot-title";
  title.textContent = "Attention snapshot · " + snapshot.title;
  const note = document.createElement("p");
  note.className = "tab-status";
  note.textContent = snapshot.note;
  const api = snapshotApi(snapshot);
  const entries = snapshot.runs.map(run => ({ run: run.run, label: run.label, has_maps: true }));
  const panels = document.createElement("div");
  panels.className = "panels";
  const current = entries.map(entry => createPanel(entry, api));
  panels.replaceChildren(...current.map(p => p.root));
  const controls = createControls(entries, [entries[0].run, entries[1] ? entries[1].run : null], {
    runs: () => {}, sentence: () => {}, clear: () => {},
    step: step => { for (const p of current) p.showStep(step); },
  });
  controls.showVocabulary([]);  // no checkpoint in a snapshot: no sentence box, no words to list
  for (const node of controls.bar.querySelectorAll(".run-picker, .sentence-form, .vocabulary")) node.hidden = true;
  document.body.append(title, note, controls.bar, panels);
  const steps = [...new Set((await Promise.all(current.map(p => p.load()))).flat())].sort((a, b) => a - b);
  controls.setSteps(steps);
  controls.setClamps(current.map(p => ({ label: p.label, clamp: p.clamp })));
  await Promise.all(current.map(p => p.showStep(steps[steps.length - 1])));
  document.body.dataset.ready = "true";
}
