// The tab's top bar: two run pickers (side by side), the step slider that moves every map, and the sentence
// box. It only builds elements and reports choices; index.js decides what they do.

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
  const slider = element("input", "step-slider");
  slider.type = "range"; slider.min = "0"; slider.max = "0"; slider.value = "0";
  slider.setAttribute("aria-label", "step");
  const stepLabel = element("span", "step-label");
  stepBox.append(slider, stepLabel);
  let steps = [];
  slider.addEventListener("input", () => {
    const step = steps[Number(slider.value)];
    stepLabel.textContent = String(step);
    on.step(step);
  });

  const form = element("form", "sentence-form");
  const input = element("input", "sentence-input");
  input.type = "text"; input.placeholder = "any sentence, e.g. Your journey starts with one step";
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

  bar.append(first.wrap, second.wrap, stepBox, form);
  return {
    bar,
    // The steps the slider offers (every run's logged steps together); it moves to the last one.
    setSteps(next) {
      steps = next;
      slider.max = String(Math.max(0, steps.length - 1));
      slider.value = slider.max;
      slider.disabled = steps.length < 2;
      stepLabel.textContent = steps.length ? String(steps[steps.length - 1]) : "no logged steps";
    },
  };
}
