// The attention tab, loaded by TensorBoard as an ES module (frontend_metadata's es_module_path): its
// render() builds the page inside the tab's frame. Everything it loads comes from this plugin's routes.

import { createControls } from "./controls.js";
import { createPanel } from "./panel.js";

const BASE = new URL(".", import.meta.url);  // /data/plugin/attention_lab/

// GET a route of this plugin: {ok, data}; a failure carries {error} in data, never throws.
async function get(route, params) {
  const url = new URL(route, BASE);
  for (const [key, value] of Object.entries(params || {})) url.searchParams.set(key, String(value));
  try {
    const response = await fetch(url);
    const data = await response.json();
    return { ok: response.ok, data: response.ok ? data : { error: data.error || "request failed" } };
  } catch (err) {
    return { ok: false, data: { error: "TensorBoard did not answer (" + err.name + ")" } };
  }
}

// What to do, in one line; why steps may be missing, one click away.
function helpLine() {
  const help = document.createElement("div");
  help.className = "tab-help";
  help.append("Click a small map to enlarge it: it stays while you move the slider, and ★ marks the best head " +
    "of the run's task at each step. Hover a cell for its words and weight. ");
  const more = document.createElement("details");
  more.className = "help-more";
  const summary = document.createElement("summary");
  summary.textContent = "Missing steps?";
  const flag = document.createElement("code");
  flag.textContent = "--samples_per_plugin=attention_lab=0";
  const script = document.createElement("code");
  script.textContent = "python scripts/start_tensorboard.py";
  more.append(summary, "TensorBoard keeps 100 logged steps a run (10 with --load_fast=false) unless started with ",
    flag, ", which keeps every step with either loader; ", script, " starts it so.");
  help.appendChild(more);
  return help;
}

function addStyle() {
  const link = document.createElement("link");
  link.rel = "stylesheet";
  link.href = new URL("style.css", BASE).href;
  document.head.appendChild(link);
}

export async function render() {
  addStyle();
  document.body.className = "attention-tab";
  const status = document.createElement("p");
  status.className = "tab-status";
  status.textContent = "Loading runs…";
  document.body.appendChild(status);
  const reply = await get("runs");
  if (!reply.ok) { status.textContent = reply.data.error; return; }
  const runs = reply.data.runs;
  if (!runs.length) {
    status.textContent = "No runs in this log directory yet: train one (python scripts/train.py) and reload.";
    document.body.dataset.ready = "true";
    return;
  }
  // /runs lists the runs with maps first, newest first: the tab opens on the newest run, the one before it beside it
  const withMaps = runs.filter(r => r.has_maps).map(r => r.run);
  const chosen = [withMaps[0] || runs[0].run, withMaps[1] || null];
  const panels = document.createElement("div");
  panels.className = "panels";
  let current = [];
  let sentence = null;

  async function showRuns(first, second) {
    current = [first, second].filter(Boolean).map(run => createPanel(runs.find(r => r.run === run), { get }));
    panels.replaceChildren(...current.map(p => p.root));
    const steps = new Set((await Promise.all(current.map(p => p.load()))).flat());
    controls.setSteps([...steps].sort((a, b) => a - b));
    controls.setClamps(current.map(p => ({ label: p.label, clamp: p.clamp })));
    const last = Math.max(-1, ...steps);
    listVocabulary([first, second].filter(Boolean), current);  // the checkpoints load meanwhile: not awaited
    await Promise.all(current.map(p => (sentence === null ? p.showStep(last) : p.showSentence(sentence))));
  }

  async function listVocabulary(names, shown) {
    const replies = await Promise.all(shown.map(p => p.vocabulary()));
    if (shown === current)  // not replaced by other runs meanwhile
      controls.showVocabulary(names.map((run, i) => ({ label: runs.find(r => r.run === run).label, reply: replies[i] })));
  }

  const controls = createControls(runs, chosen, {
    runs: (first, second) => showRuns(first, second),
    step: step => { for (const p of current) p.showStep(step); },
    sentence: text => { sentence = text; for (const p of current) p.showSentence(text); },
    clear: () => { sentence = null; for (const p of current) p.clearSentence(); },
  });
  status.hidden = true;
  document.body.append(controls.bar, helpLine(), panels);
  await showRuns(chosen[0], chosen[1]);
  document.body.dataset.ready = "true";
}
