// One run in the tab: its maps at the chosen step (or for the sentence of the text box), one head enlarged
// with its head view, and its head scores and ablation drops. Until a map is clicked, the enlarged head is the
// one scoring highest on the run's task kind (the scores route's focus). The panel's data-state says what it
// shows ("loading", "maps", "message"), and data-step which logged step.

import { mountHeadView } from "./head_view.js";
import { addScoreLinks, gridLinks, headViewLinks, mapLinks } from "./export.js";
import { describeCell, heatmap, mapsGrid, scaleLegend } from "./heatmaps.js";
import { scoresView } from "./scores.js";
import { createCircuits } from "./circuits.js";

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
  const source = element("p", "source");
  const hoverInfo = element("p", "hover-info", "hover a cell for its words and weight");
  const grid = element("div", "grid-box");
  const detailTitle = element("h4", "detail-title");
  const enlarged = element("div", "enlarged");
  const controls = element("div", "hv-controls");
  const layerSelect = element("select", "layer-select");
  layerSelect.setAttribute("aria-label", "layer");
  const heads = element("span", "hv-heads");
  const allHeads = element("button", "all-heads", "all heads");
  allHeads.type = "button";
  controls.append(element("span", "", "Layer"), layerSelect, element("span", "", "Head"), heads, allHeads);
  const hvStatus = element("p", "hv-status");
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "head-view");
  const tooltip = element("div", "tooltip");
  tooltip.hidden = true;
  const scores = element("div", "scores-box");
  const overview = element("div", "row");  // every head's map, with the scores of the same heads beside it
  overview.append(grid, scores);
  const enlargedBox = element("div", "enlarged-box");
  enlargedBox.append(detailTitle, enlarged);
  const headViewBox = element("div", "head-view-box");
  headViewBox.append(controls, hvStatus, svg);
  const hvExport = element("div", "hv-export");  // its export links, set by draw()
  headViewBox.appendChild(hvExport);
  const detail = element("div", "row detail");
  detail.append(enlargedBox, headViewBox);
  const circuits = createCircuits(run, api, entry.label);  // composition, patching, loss by index, word tables, ...
  const body = element("div", "panel-body");
  body.append(source, hoverInfo, overview, detail, circuits.root, tooltip);
  root.append(title, message, body);

  // chosen: a map was clicked (the focus no longer moves the enlarged head); pointer: where the cursor last
  // hovered a cell
  const state = { steps: [], data: null, sentence: null, selected: { layer: 0, head: 0 }, chosen: false,
                  pointer: null, request: 0, sentenceRequest: 0, cache: new Map(), headView: null, runMessage: "" };

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

  // The head the run's scores point at, enlarged until the user clicks a map.
  function applyFocus(focus) {
    if (state.chosen || !focus) return false;
    const changed = focus.layer !== state.selected.layer || focus.head !== state.selected.head;
    state.selected = { layer: focus.layer, head: focus.head };
    return changed;
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
    grid.replaceChildren(scaleLegend(data.scale), mapsGrid(data, { selected: state.selected, onHover: hover, onLeave: unhover,
      onSelect: (layer, head) => {
        state.selected = { layer, head }; state.chosen = true; draw(); state.headView.show(layer, [head]);
      } }));
    const shown = state.sentence ? "sentence" : "step " + data.step;  // exports: SVG, PNG and CSV (export.js)
    grid.appendChild(gridLinks(data, entry.label, shown));
    const { layer, head } = state.selected;
    detailTitle.textContent = "layer " + layer + ", head " + head;
    const size = Math.max(data.query_words.length, data.key_words.length);
    enlarged.replaceChildren(heatmap(data, layer, head, { cell: Math.max(14, Math.min(34, Math.floor(300 / size))),
      labels: true, onHover: hover, onLeave: unhover }));
    enlarged.appendChild(mapLinks(data, layer, head, entry.label, shown));
    hvExport.replaceChildren(headViewLinks(svg, hvStatus, data, entry.label, shown));
    rehover(data);
    circuits.showHead(layer, head);
    const viewData = { query_words: data.query_words, key_words: data.key_words, query_axis: data.query_axis,
                       weights: data.weights, scale: data.scale };
    if (state.headView) state.headView.setData(viewData);
    else state.headView = mountHeadView({ layerSelect, heads, allHeads, status: hvStatus, svg, tooltip }, viewData,
                                        { initial: state.selected });
  }

  function showScores(reply) {
    scores.replaceChildren(reply.ok ? scoresView(reply.data) : element("p", "note", reply.data.error));
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
    // The logged steps of the run ([] with a message when it has none).
    async load() {
      const reply = await fetchStep(null);
      if (!reply.ok) {
        state.runMessage = reply.data.error;
        say(state.runMessage);
        root.dataset.state = "message";
        return [];
      }
      state.steps = reply.data.steps;
      return state.steps;
    },
    // The maps logged last at or before ``step``.
    async showStep(step) {
      if (!state.steps.length) return;
      const logged = [...state.steps].reverse().find(s => s <= step) ?? state.steps[0];
      const request = ++state.request;
      root.dataset.state = "loading";
      circuits.showStep(logged);
      // the scores of the same step, asked for at once: they say which head to enlarge before the maps are drawn
      const [reply, scoresReply] = await Promise.all([fetchStep(logged), api.get("scores", { run, step: logged })]);
      if (request !== state.request) return;  // a newer step was asked for meanwhile
      if (!reply.ok) { say(reply.data.error); root.dataset.state = "message"; return; }
      state.data = reply.data;
      if (!state.sentence)  // the sentence's notes stay while its maps are shown
        say(logged > step ? "no maps at or before step " + step + ": showing the first logged step" : "");
      const refocus = scoresReply.ok && applyFocus(scoresReply.data.focus);
      showScores(scoresReply);  // first: the maps below it are drawn where they will stay (see rehover)
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
