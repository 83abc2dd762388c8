// One run in the tab. First what teaches: one head enlarged with its words, beside (or, in a narrow panel, above)
// every head's small map at the chosen step (or for the sentence of the text box), then the enlarged head's head
// view; one click away, collapsed, its head scores and ablation drops and its circuits. The tab opens on the head
// scoring highest on the run's task kind at the first step shown (the scores route's focus); that head then stays
// enlarged while the slider moves (pinned) until another map is clicked, and ★ marks each step's best head. The
// panel's data-state says what it shows ("loading", "maps", "message"), and data-step which logged step.

import { mountHeadView } from "./head_view.js";
import { addScoreLinks, gridLinks, headViewLinks, mapLinks } from "./export.js";
import { describeCell, heatmap, largeCell, mapsGrid, scaleLegend } from "./heatmaps.js";
import { scoresStep, scoresView } from "./scores.js";
import { createCircuits } from "./circuits.js";
import { section } from "./steps.js";

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

// run: an entry of /runs ({run, label}); api: {get(route, params) -> Promise<{ok, data}>}, as index.js makes it
export function createPanel(entry, api) {
  const run = entry.run;
  const root = element("section", "panel");
  root.dataset.run = run;
  root.dataset.state = "loading";
  const title = element("h3", "run-name", entry.label);
  title.title = run;  // TensorBoard's name for it
  const message = element("p", "message");
  message.setAttribute("role", "status");
  const source = element("p", "source");  // the probe or the sentence, and the one step label of the view
  const hoverInfo = element("p", "hover-info", "hover a cell for its words and weight");
  const detailTitle = element("h4", "detail-title");
  const focusNote = element("p", "focus-note");
  const enlarged = element("div", "enlarged");
  const enlargedBox = element("div", "enlarged-box");
  enlargedBox.append(detailTitle, focusNote, enlarged);
  const grid = element("div", "grid-box");
  const firstView = element("div", "row first-view");  // the enlarged head, every head's map beside it
  firstView.append(enlargedBox, grid);
  const controls = element("div", "hv-controls");
  const layerSelect = element("select", "layer-select");
  layerSelect.setAttribute("aria-label", "layer");
  const heads = element("span", "hv-heads");
  const allHeads = element("button", "all-heads", "all heads");
  allHeads.type = "button";
  controls.append(element("span", "", "Head view: layer"), layerSelect, element("span", "", "head"), heads, allHeads);
  const hvStatus = element("p", "hv-status");
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "head-view");
  const tooltip = element("div", "tooltip");
  tooltip.hidden = true;
  const headViewBox = element("div", "head-view-box");
  const hvExport = element("div", "hv-export");  // its export links, set by draw()
  headViewBox.append(controls, hvStatus, svg, hvExport);
  const scoresSection = section("scores-section", "Head scores and ablations");
  const scores = element("div", "scores-box");
  scoresSection.details.appendChild(scores);
  const circuits = createCircuits(run, api, entry.label);  // composition, patching, loss by index, word tables, ...
  const body = element("div", "panel-body");
  body.append(source, hoverInfo, firstView, headViewBox, scoresSection.details, circuits.root, tooltip);
  root.append(title, message, body);

  // placed: the enlarged head was chosen (by the first step's focus or a click) and stays; best: the focus of the
  // step shown; pointer: where the cursor last hovered a cell
  const state = { steps: [], clamp: null, data: null, sentence: null, selected: { layer: 0, head: 0 }, placed: false,
                  best: null, pointer: null, request: 0, sentenceRequest: 0, cache: new Map(), headView: null,
                  runMessage: "" };

  function say(text) {
    message.textContent = text || "";
    message.hidden = !text;
  }

  function hover(info, event) {
    state.pointer = event ? { x: event.clientX, y: event.clientY } : state.pointer;
    hoverInfo.textContent = describeCell(info);
  }
  function unhover() { state.pointer = null; hoverInfo.textContent = "hover a cell for its words and weight"; }

  // New maps (a step, a sentence) are drawn under a cursor that may rest on a cell (the sentence sent with
  // Enter): the line describes the new cell under it, or goes back to the hint, never the words drawn before.
  function rehover(data) {
    const at = state.pointer && document.elementFromPoint(state.pointer.x, state.pointer.y);
    const map = at && at.matches("rect.cell") && root.contains(at) ? at.closest("svg.heatmap") : null;
    if (!map) { unhover(); return; }
    const layer = Number(map.dataset.layer), head = Number(map.dataset.head);
    const q = Number(at.dataset.q), k = Number(at.dataset.k);
    hover({ layer, head, q, k, query: data.query_words[q], key: data.key_words[k], weight: data.weights[layer][head][q][k] });
  }

  // The step's best head is marked; the first step shown also enlarges it. Whether the enlarged head changed.
  function applyFocus(focus) {
    state.best = focus || null;
    if (state.placed) return false;
    state.placed = true;
    if (!focus) return false;
    const changed = focus.layer !== state.selected.layer || focus.head !== state.selected.head;
    state.selected = { layer: focus.layer, head: focus.head };
    return changed;
  }

  function focusWords() {
    const { layer, head } = state.selected, best = state.best;
    const stays = "stays while you move the slider";
    if (!best || state.sentence) return stays;
    const score = " (score " + best.score.toFixed(2) + ")";
    if (best.layer === layer && best.head === head) return "★ the best " + best.kind + " head here" + score + "; " + stays;
    return stays + " · ★ best " + best.kind + " head here: layer " + best.layer + ", head " + best.head + score;
  }

  function draw() {
    const data = state.sentence || state.data;
    if (!data) { body.hidden = true; return; }
    body.hidden = false;
    const layers = data.weights.length, headCount = data.weights[0].length;
    state.selected.layer = Math.min(state.selected.layer, layers - 1);
    state.selected.head = Math.min(state.selected.head, headCount - 1);
    source.textContent = state.sentence
      ? "your sentence: “" + state.sentence.words.join(" ") + "” → “" + state.sentence.predictions.join(" ") +
        "” (" + state.sentence.checkpoint + ", step " + state.sentence.step + ")"
      : "probe “" + data.key_words.join(" ") + "” at step " + data.step;
    const shown = state.sentence ? "sentence" : "step " + data.step;  // exports: SVG, PNG and CSV (export.js)
    const { layer, head } = state.selected;
    detailTitle.textContent = "layer " + layer + ", head " + head;
    focusNote.textContent = focusWords();
    const size = Math.max(data.query_words.length, data.key_words.length);
    const beside = element("div", "enlarged-side");  // the colour bar and the downloads, right of the map
    beside.append(scaleLegend(data.scale), mapLinks(data, layer, head, entry.label, shown));
    enlarged.replaceChildren(heatmap(data, layer, head, { cell: largeCell(size), labels: true, onHover: hover,
      onLeave: unhover }), beside);
    grid.replaceChildren(mapsGrid(data, { selected: state.selected, best: state.sentence ? null : state.best,
      onHover: hover, onLeave: unhover,
      onSelect: (l, h) => {
        state.selected = { layer: l, head: h }; state.placed = true; draw(); state.headView.show(l, [h]);
      } }), gridLinks(data, entry.label, shown));
    hvExport.replaceChildren(headViewLinks(svg, hvStatus, data, entry.label, shown));
    rehover(data);
    circuits.showHead(layer, head);
    const viewData = { query_words: data.query_words, key_words: data.key_words, query_axis: data.query_axis,
                       weights: data.weights, scale: data.scale };
    if (state.headView) state.headView.setData(viewData);
    else state.headView = mountHeadView({ layerSelect, heads, allHeads, status: hvStatus, svg, tooltip }, viewData,
                                        { initial: state.selected });
  }

  function showScores(reply, step) {
    scores.replaceChildren(reply.ok ? scoresView(reply.data, step) : element("p", "note", reply.data.error));
    scoresSection.step.textContent = reply.ok ? " · " + scoresStep(reply.data, step) : "";
    if (reply.ok) addScoreLinks(scores, reply.data, entry.label);
  }

  async function fetchStep(step) {
    const key = step === null ? "last" : String(step);
    if (!state.cache.has(key)) state.cache.set(key, api.get("maps", step === null ? { run } : { run, step }));
    return state.cache.get(key);
  }

  return {
    root,
    get steps() { return state.steps; },
    // The heads the run clamped and the steps it clamped them at ({heads, from, until}), or null.
    get clamp() { return state.clamp; },
    label: entry.label,
    // The logged steps of the run ([] with a message when it has none); the circuits' example pair is sought
    // for its probe meanwhile.
    async load() {
      const reply = await fetchStep(null);
      if (!reply.ok) {
        state.runMessage = reply.data.error;
        say(state.runMessage);
        root.dataset.state = "message";
        return [];
      }
      state.steps = reply.data.steps;
      state.clamp = reply.data.clamp || null;
      circuits.setSteps(state.steps);
      circuits.showExample(reply.data.key_words.join(" "));
      return state.steps;
    },
    // The words the run's checkpoint knows, for the sentence box ({ok, data: {words, size} or {error}}).
    vocabulary: () => api.get("vocabulary", { run }),
    // The maps logged last at or before ``step``.
    async showStep(step) {
      if (!state.steps.length) return;
      const logged = [...state.steps].reverse().find(s => s <= step) ?? state.steps[0];
      const request = ++state.request;
      root.dataset.state = "loading";
      circuits.showStep(logged);
      // the scores of the same step, asked for at once: they say which head to mark before the maps are drawn
      const [reply, scoresReply] = await Promise.all([fetchStep(logged), api.get("scores", { run, step: logged })]);
      if (request !== state.request) return;  // a newer step was asked for meanwhile
      if (!reply.ok) { say(reply.data.error); root.dataset.state = "message"; return; }
      state.data = reply.data;
      if (!state.sentence)  // the sentence's notes stay while its maps are shown
        say(logged > step ? "no maps at or before step " + step + ": showing the first logged step" : "");
      const refocus = applyFocus(scoresReply.ok ? scoresReply.data.focus : null);
      showScores(scoresReply, reply.data.step);  // first: the maps are drawn where they will stay (see rehover)
      draw();
      if (refocus) state.headView.show(state.selected.layer, [state.selected.head]);
      root.dataset.step = reply.data.step;
      root.dataset.state = "maps";
    },
    async showSentence(text) {
      const request = ++state.request, asked = ++state.sentenceRequest;
      circuits.showSentence(text);
      root.dataset.state = "loading";
      const reply = await api.get("sentence", { run, text });
      if (request !== state.request || asked !== state.sentenceRequest) return;  // a newer step, or cleared
      if (!reply.ok) {  // the message, over the run's own maps (if any), never an earlier sentence's
        state.sentence = null;
        draw();
        say(reply.data.error);
        root.dataset.state = "message";
        return;
      }
      state.sentence = reply.data;
      say(reply.data.notes.join("; "));
      draw();
      root.dataset.state = "maps";
    },
    clearSentence() {
      state.sentenceRequest++;  // a reply still on its way is for a sentence no longer asked
      state.sentence = null;
      circuits.clearSentence();
      say(state.runMessage);
      draw();
      root.dataset.state = state.data ? "maps" : "message";
    },
  };
}
