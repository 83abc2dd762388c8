// The bertviz-style head view: queries on the left, keys on the right, one line per (query, key) pair whose
// opacity is the attention weight, coloured by head. One renderer for two hosts: the offline page of
// review/html_view.py inlines this file, and the TensorBoard tab imports it as a module. Every word is set
// with textContent or setAttribute, never parsed as HTML.

export const HEAD_COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
  "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];  // d3 category10, as bertviz

const SVG_NS = "http://www.w3.org/2000/svg";
const ROW = 28, TOP = 40, GAP = 240, PAD = 12, LABEL = 44;

export function headColor(head) { return HEAD_COLORS[head % HEAD_COLORS.length]; }
// A weight the model made NaN or infinite arrives as null: shown as "–" and drawn as no line.
export function formatWeight(w) { return Number.isFinite(w) ? w.toFixed(2) : "–"; }

function svgElement(name, attrs, text) {
  const node = document.createElementNS(SVG_NS, name);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function clampInt(value, lo, hi, fallback) {
  const n = parseInt(value, 10);
  return Number.isFinite(n) && n >= lo && n <= hi ? n : fallback;
}

// parts: {layerSelect, heads, allHeads, status, svg, tooltip}, elements the host page owns.
// data: {query_words, key_words, query_axis, weights[layer][head][query][key]}.
// options.useHash: the address keeps the view (#layer=1&head=2), as on the offline page.
// options.initial: {layer, head} to open on (the head scoring highest on the run's task kind); the address wins.
export function mountHeadView(parts, data, options = {}) {
  const start = options.initial || { layer: 0, head: 0 };
  const state = { layer: start.layer, heads: [start.head], hover: null };
  let layout = null;  // x positions of the two columns, set by render()
  const svg = parts.svg;
  const counts = () => ({ layers: data.weights.length, heads: data.weights[0].length });
  state.layer = Math.min(Math.max(0, state.layer), counts().layers - 1);
  if (!(state.heads[0] >= 0 && state.heads[0] < counts().heads)) state.heads = [0];

  function readHash() {
    const { layers, heads } = counts();
    const params = new URLSearchParams(location.hash.replace(/^#/, ""));
    state.layer = clampInt(params.get("layer"), 0, layers - 1, state.layer);
    if (params.get("head") === "all") { state.heads = [...Array(heads).keys()]; }
    else if (params.has("head")) {
      const chosen = params.get("head").split(",").map(h => clampInt(h, 0, heads - 1, -1)).filter(h => h >= 0);
      if (chosen.length) state.heads = [...new Set(chosen)].sort((a, b) => a - b);
    }
  }
  function writeHash() {
    const heads = counts().heads;
    const head = state.heads.length === heads && heads > 1 ? "all" : state.heads.join(",");
    history.replaceState(null, "", "#layer=" + state.layer + "&head=" + head);
  }

  function textWidth(words) {  // measured with the page's font
    const probe = svgElement("text", { x: 0, y: -100 });
    svg.appendChild(probe);
    let width = 0;
    for (const w of words) { probe.textContent = w; width = Math.max(width, probe.getComputedTextLength()); }
    probe.remove();
    return Math.ceil(width);
  }

  function buildControls() {
    const { layers, heads } = counts();
    parts.layerSelect.replaceChildren();
    for (let l = 0; l < layers; l++) parts.layerSelect.appendChild(new Option(String(l), String(l)));
    parts.heads.replaceChildren();
    for (let h = 0; h < heads; h++) {
      const b = document.createElement("button");
      b.type = "button"; b.className = "head"; b.dataset.head = h; b.textContent = h;
      b.style.background = headColor(h); b.title = "head " + h + " (Shift+click: add or remove)";
      b.addEventListener("click", event => {
        if (event.shiftKey) {
          const i = state.heads.indexOf(h);
          if (i >= 0 && state.heads.length > 1) state.heads.splice(i, 1);
          else if (i < 0) { state.heads.push(h); state.heads.sort((a, b) => a - b); }
        } else { state.heads = [h]; }
        update();
      });
      parts.heads.appendChild(b);
    }
  }

  function update() { if (options.useHash) writeHash(); render(); }

  function render() {
    const { layers, heads } = counts();
    parts.layerSelect.value = String(state.layer);
    for (const b of parts.heads.querySelectorAll("button.head"))
      b.classList.toggle("selected", state.heads.includes(Number(b.dataset.head)));
    // A signed map (plotting/colour_scale.py): opacity is |weight| over the largest |weight|, negatives dashed.
    const signed = Boolean(data.scale && data.scale.signed);
    const headText = state.heads.length === 1 ? "head " + state.heads[0] : "heads " + state.heads.join(", ");
    parts.status.textContent = "layer " + state.layer + " of " + layers + " · " + headText + " of " + heads +
      (signed ? " · line opacity = |weight| / " + formatWeight(data.scale.vmax) + ", dashed = negative"
              : " · line opacity = attention weight");

    svg.replaceChildren();
    hideTooltip();  // its line is gone: a tooltip left up would describe the weights drawn before
    const leftW = textWidth(data.query_words), rightW = textWidth(data.key_words);
    const labelW = LABEL * Math.max(1, state.heads.length);
    const xLeft = PAD + labelW + leftW, xRight = xLeft + GAP;
    layout = { xLeft, xRight, leftW, rightW };
    const rows = Math.max(data.query_words.length, data.key_words.length);
    svg.setAttribute("width", xRight + rightW + labelW + PAD);
    svg.setAttribute("height", TOP + rows * ROW + PAD);
    svg.appendChild(svgElement("text", { x: xLeft, y: 14, "text-anchor": "end", class: "column-title" }, data.query_axis));
    svg.appendChild(svgElement("text", { x: xRight, y: 14, class: "column-title" }, "key (attended to)"));
    const y = i => TOP + i * ROW + ROW / 2;
    const weights = data.weights[state.layer];

    const lines = svgElement("g", { class: "lines" });
    for (const h of state.heads) {
      for (let q = 0; q < data.query_words.length; q++) {
        for (let k = 0; k < data.key_words.length; k++) {
          const w = weights[h][q][k];
          const line = svgElement("line", { class: "attn", x1: xLeft + 6, y1: y(q), x2: xRight - 6, y2: y(k),
            stroke: headColor(h), "stroke-opacity": !Number.isFinite(w) ? 0 : signed ? Math.abs(w) / data.scale.vmax : w,
            "data-head": h, "data-q": q, "data-k": k, "data-weight": w });
          if (signed && w < 0) line.setAttribute("stroke-dasharray", "4 3");
          line.appendChild(svgElement("title", {},
            "head " + h + ": " + data.query_words[q] + " → " + data.key_words[k] + "  " + formatWeight(w)));
          line.addEventListener("mousemove", event => showTooltip(event, line.firstChild.textContent));
          line.addEventListener("mouseleave", hideTooltip);
          lines.appendChild(line);
        }
      }
    }
    svg.appendChild(lines);
    column(data.query_words, "left", xLeft, "end", y, leftW);
    column(data.key_words, "right", xRight, "start", y, rightW);
    applyHover();
  }

  function column(words, side, x, anchor, y, width) {
    const g = svgElement("g", { class: "column " + side });
    words.forEach((word, i) => {
      const x0 = anchor === "end" ? x - width - 4 : x - 4;
      g.appendChild(svgElement("rect", { class: "token-bg", "data-side": side, "data-index": i,
        x: x0, y: y(i) - ROW / 2 + 2, width: width + 8, height: ROW - 4, rx: 3 }));
      g.appendChild(svgElement("text", { class: "token " + side, "data-index": i, x: x, y: y(i),
        "text-anchor": anchor }, word));
    });
    g.addEventListener("mouseover", event => {
      const i = event.target.getAttribute("data-index");
      if (i !== null) { state.hover = { side: side, index: Number(i) }; applyHover(); }
    });
    g.addEventListener("mouseleave", () => { state.hover = null; applyHover(); });
    svg.appendChild(g);
  }

  function applyHover() {
    for (const node of svg.querySelectorAll(".weight-label")) node.remove();
    for (const node of svg.querySelectorAll(".active")) node.classList.remove("active");
    const hover = state.hover;
    for (const line of svg.querySelectorAll("line.attn")) {
      const keep = !hover || Number(line.dataset[hover.side === "left" ? "q" : "k"]) === hover.index;
      line.classList.toggle("hidden", !keep);
    }
    if (!hover) return;
    for (const node of svg.querySelectorAll('[data-index="' + hover.index + '"]'))
      if (node.closest(".column." + hover.side)) node.classList.add("active");
    // Weights beside the other column, one aligned column of numbers per selected head, in its colour.
    const other = hover.side === "left" ? "right" : "left";
    const weights = data.weights[state.layer];
    for (const token of svg.querySelectorAll(".token." + other)) {
      const j = Number(token.dataset.index);
      state.heads.forEach((h, n) => {
        const w = hover.side === "left" ? weights[h][hover.index][j] : weights[h][j][hover.index];
        const x = other === "right" ? layout.xRight + layout.rightW + 12 + LABEL * n
                                    : layout.xLeft - layout.leftW - 12 - LABEL * (state.heads.length - 1 - n);
        svg.appendChild(svgElement("text", { class: "weight-label", x: x, y: token.getAttribute("y"),
          fill: headColor(h), "text-anchor": other === "right" ? "start" : "end", "data-head": h, "data-index": j },
          formatWeight(w)));
      });
    }
  }

  function showTooltip(event, text) {
    parts.tooltip.textContent = text; parts.tooltip.hidden = false;
    parts.tooltip.style.left = (event.clientX + 12) + "px"; parts.tooltip.style.top = (event.clientY + 12) + "px";
  }
  function hideTooltip() { parts.tooltip.hidden = true; }

  parts.layerSelect.addEventListener("change", () => { state.layer = Number(parts.layerSelect.value); update(); });
  parts.allHeads.addEventListener("click", () => { state.heads = [...Array(counts().heads).keys()]; update(); });
  if (options.useHash) {
    readHash();
    window.addEventListener("hashchange", () => { readHash(); render(); });
  }
  buildControls();
  render();

  return {
    // New weights (another step or sentence); the chosen layer and heads stay where they still exist.
    setData(next) {
      const shapeChanged = next.weights.length !== data.weights.length ||
        next.weights[0].length !== data.weights[0].length;
      data = next;
      const { layers, heads } = counts();
      state.layer = Math.min(state.layer, layers - 1);
      state.heads = state.heads.filter(h => h < heads);
      if (!state.heads.length) state.heads = [0];
      state.hover = null;
      if (shapeChanged) buildControls();
      render();
    },
    show(layer, heads) { state.layer = layer; state.heads = heads; update(); },
  };
}
