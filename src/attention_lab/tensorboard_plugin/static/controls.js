// The tab's top bar: two run pickers (side by side), the step slider that moves every map (a shaded band under
// it marks the steps at which a run clamped heads, and the words beside the step name them), and the sentence
// box with the words the runs' checkpoints know (a word outside them is read as <unk>; clicking a listed word
// adds it to the sentence). It only builds elements and reports choices; index.js decides what they do.

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function runPicker(label, runs, chosen, allowNone) {
  const wrap = element("label", "run-picker", label + " ");
  const select = element("select", "run-select");
  if (allowNone) select.appendChild(new Option("(none)", ""));
  for (const run of runs) {
    const option = new Option(run.label + (run.has_maps ? "" : "  (no maps)"), run.run);
    option.title = run.run;  // TensorBoard's name for it: the path under the log directory
    select.appendChild(option);
  }
  select.value = chosen || "";
  wrap.appendChild(select);
  return { wrap, select };
}

// runs: what /runs lists; on: {runs(first, second), step(step), sentence(text), clear()}
export function createControls(runs, chosen, on) {
  const bar = element("div", "controls");
  const first = runPicker("Run", runs, chosen[0], false);
  const second = runPicker("beside it", runs, chosen[1], true);
  const changed = () => on.runs(first.select.value, second.select.value || null);
  first.select.addEventListener("change", changed);
  second.select.addEventListener("change", changed);

  const stepBox = element("label", "step-box", "Step ");
  const track = element("span", "step-track");  // the slider over its clamped bands
  const slider = element("input", "step-slider");
  slider.type = "range"; slider.min = "0"; slider.max = "0"; slider.value = "0";
  slider.setAttribute("aria-label", "step");
  const marks = element("span", "clamp-marks");
  marks.setAttribute("aria-hidden", "true");
  track.append(marks, slider);
  const stepLabel = element("span", "step-label");
  const clampWords = element("span", "clamp-words");
  stepBox.append(track, stepLabel, clampWords);
  let steps = [];
  let clamps = [];  // [{label, clamp: {heads, from, until}}]: the runs shown that clamped heads
  let named = false;  // two runs shown: the words say whose heads
  slider.addEventListener("input", () => {
    const step = steps[Number(slider.value)];
    stepLabel.textContent = String(step);
    sayClamped(step);
    on.step(step);
  });

  const clamped = (clamp, step) => step >= clamp.from && (clamp.until === null || step < clamp.until);

  // The words beside the step: which heads are clamped there (and by which run, when two are shown).
  function sayClamped(step) {
    const inside = clamps.filter(c => step !== undefined && clamped(c.clamp, step));
    clampWords.textContent = inside.map(c => "clamped: " + c.clamp.heads.join(", ") +
      (named ? " (" + c.label + ")" : "")).join(" · ");
    clampWords.hidden = !inside.length;
  }

  // One band per run over the slider's positions of its clamped steps, from halfway to the step before to halfway
  // to the step after (the track's ends at the first and last steps); the thumb's centre runs 8 px in from each end.
  function drawMarks() {
    const last = steps.length - 1;
    const at = (index, end) => (index <= 0 && end === "start") || (index >= last && end === "end")
      ? (end === "start" ? "0px" : "100%") : "calc(8px + (100% - 16px) * " + (index / last) + ")";
    marks.replaceChildren(...clamps.flatMap((c, n) => {
      const inside = steps.map((s, i) => [s, i]).filter(([s]) => clamped(c.clamp, s)).map(([, i]) => i);
      if (!inside.length) return [];
      const first = inside[0], end = inside[inside.length - 1];
      const band = element("span", "clamp-band" + (n ? " second" : ""));
      band.style.left = at(first - 0.5, "start");
      band.style.right = "calc(100% - " + at(end + 0.5, "end") + ")";
      band.dataset.first = String(steps[first]);
      band.dataset.last = String(steps[end]);
      return [band];
    }));
    sayClamped(steps[Number(slider.value)]);
  }

  const form = element("form", "sentence-form");
  const input = element("input", "sentence-input");
  input.type = "text"; input.placeholder = "a sentence (words below)";
  input.setAttribute("aria-label", "sentence");
  const run = element("button", "sentence-run", "Show its attention");
  run.type = "submit";
  const clear = element("button", "sentence-clear", "Back to the logged steps");
  clear.type = "button";
  clear.hidden = true;
  form.append(input, run, clear);
  form.addEventListener("submit", event => {
    event.preventDefault();
    if (!input.value.trim()) return;
    clear.hidden = false;
    on.sentence(input.value);
  });
  clear.addEventListener("click", () => { clear.hidden = true; on.clear(); });

  const vocabulary = element("div", "vocabulary");
  vocabulary.dataset.state = "loading";
  vocabulary.addEventListener("click", event => {
    const word = event.target.closest("button.vocab-word");
    if (!word) return;
    input.value = (input.value.trimEnd() + " " + word.textContent).trimStart();
    input.focus();
  });

  bar.append(first.wrap, second.wrap, stepBox, form, vocabulary);
  return {
    bar,
    // lists: [{label, reply}], a run's label and what the vocabulary route answered for it, one per run shown.
    showVocabulary(lists) {
      const known = lists.filter(list => list.reply.ok);
      vocabulary.dataset.state = known.length ? "listed" : "message";
      if (!known.length) {
        vocabulary.replaceChildren(element("span", "note", lists.length ? "The sentence box needs the run's checkpoint: " +
          lists[0].reply.data.error : ""));
        return;
      }
      const words = [...new Set(known.flatMap(list => list.reply.data.words))];
      const owners = word => known.filter(list => list.reply.data.words.includes(word)).map(list => list.label);
      const size = known.length === 1 ? known[0].reply.data.size : words.length;
      const title = known.length > 1 && words.some(w => owners(w).length < known.length)
        ? "Words the runs know (" + size + "; faint: one run only): " : "Words it knows (" + size + "): ";
      const buttons = words.map(word => {
        const button = element("button", "vocab-word", word);
        button.type = "button";
        const who = owners(word);
        button.classList.toggle("one-run", who.length < known.length);
        button.title = who.length < known.length ? "only " + who.join(", ") + " knows it" : "add it to the sentence";
        return button;
      });
      const more = size > words.length ? [element("span", "note", " … and " + (size - words.length) + " more")] : [];
      vocabulary.replaceChildren(element("span", "vocabulary-title", title), ...buttons, ...more);
    },
    // The steps the slider offers (every run's logged steps together); it moves to the last one.
    setSteps(next) {
      steps = next;
      slider.max = String(Math.max(0, steps.length - 1));
      slider.value = slider.max;
      slider.disabled = steps.length < 2;
      stepLabel.textContent = steps.length ? String(steps[steps.length - 1]) : "no logged steps";
      drawMarks();
    },
    // The runs shown: [{label, clamp}] (the maps route's clamp of each, null: none); their clamped steps are marked.
    setClamps(shown) {
      clamps = shown.filter(c => c.clamp);
      named = shown.length > 1;
      drawMarks();
    },
  };
}
