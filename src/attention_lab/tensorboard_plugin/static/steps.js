// One step label per view, and the collapsed sections whose one-line summary says it. A panel shows the maps of one logged step (the step of the weights shown, which its
// first line names); the tables under it were logged at or before that step. Where they share the maps' step the
// view names that step once; where they were logged earlier it says so once, and only a table whose step differs
// from the others' names its own.

// mapsStep: the step of the maps shown; steps: the steps of the tables shown (the scores route pairs a validation
// logged at n - 1 with the maps of step n already). -> {summary, own(step)}: summary, the words a section's title
// ends with; own(step), what the caption of a table of that step adds ("" where the summary says it).
export function stepWords(mapsStep, steps) {
  const distinct = [...new Set(steps)];
  if (distinct.length === 0) return { summary: "nothing logged at or before step " + mapsStep, own: () => "" };
  if (distinct.length === 1)
    return { summary: distinct[0] === mapsStep ? "step " + mapsStep
      : "logged at step " + distinct[0] + ", the last at or before step " + mapsStep, own: () => "" };
  return { summary: "as logged at or before step " + mapsStep,
           own: step => (step === mapsStep ? "" : " · logged at step " + step) };
}

// A step at which a validation was logged, numbered as the maps are: Lightning logs the validation after n
// optimizer steps at n - 1, where the maps of the same model are recorded at n (focus.py's pair_with_maps, the
// rule the tables follow). mapsSteps: the run's logged map steps.
export function mapsStepOf(logged, mapsSteps) {
  return mapsSteps.includes(logged + 1) ? logged + 1 : logged;
}

// A collapsed section (one click away): its title, then the step of what it holds (stepWords), in its summary.
export function section(className, title) {
  const details = document.createElement("details");
  details.className = "section " + className;
  const summary = document.createElement("summary");
  summary.className = "section-title";
  summary.textContent = title;
  const step = document.createElement("span");
  step.className = "section-step";
  summary.appendChild(step);
  details.appendChild(summary);
  return { details, step };
}
