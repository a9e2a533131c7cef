/** Plots area: the PNG captures of the selection as Blob-URL images, each with a step slider over its history and a
 * mark while a running loop is ahead of the step drawn. */

import { displayName, formatPosition, formatShape, plotPositions } from "../format.js";
import { lagText } from "../live_state.js";
import { h, pngUrls, setText, subscribe } from "./dom.js";
import { createEditsNote } from "./edits_note.js";
import { createFigure } from "./readout_view.js";

const HINT = "Attach a hook and press Run (or run your own code) to see captures.";
const SLIDE_DELAY_MS = 150;

/** @typedef {import("../payloads.js").PlotItem} PlotItem */

/**
 * Caption text of one plot item: "title · 1×16×32×32 · step 3" (with " · call 1" for a module run twice a step).
 * @param {PlotItem} item
 */
function caption(item) {
  const parts = [item.title || item.kind || "capture"];
  if (Array.isArray(item.shape)) parts.push(formatShape(item.shape));
  if (Number.isFinite(item.step)) parts.push(formatPosition(item.step, item.call, plotPositions(item).showCall));
  return parts.join(" · ");
}

/**
 * Build the plots area for `model`, sending through `requests`; returns {el, destroy}.
 * @param {import("../widget_model.js").WidgetModel} model
 * @param {import("../widget_model.js").Requests} requests
 */
export function createPlots(model, requests) {
  const el = h("div", { cls: "hw-plots" });
  const images = pngUrls();
  /** @type {{plots: import("../payloads.js").Plots | undefined, match: boolean | undefined}} */
  let shown = { plots: undefined, match: undefined };
  /** @type {ReturnType<typeof setTimeout> | null} */
  let slideTimer = null;

  /** @param {PlotItem} item */
  function slider(item) {
    const { positions, showCall } = plotPositions(item);
    if (positions.length < 2) return null;
    const call = Number.isFinite(item.call) ? item.call : 0;
    const at = Math.max(0, positions.findIndex(([s, c]) => s === item.step && c === call));
    /** @param {number} i */
    const label = (i) => `${formatPosition(positions[i][0], positions[i][1], showCall)} (${i + 1} of ${positions.length} kept)`;
    const input = h("input", {
      cls: "hw-step",
      attrs: {
        type: "range",
        min: 0,
        max: positions.length - 1,
        value: at,
        "data-kind": item.kind ?? "",
        "aria-label": `step of the ${item.kind} capture`,
      },
    });
    const text = h("span", { cls: "hw-step-label", text: label(at) });
    input.addEventListener("input", () => {
      const [step, call] = positions[Number(input.value)];
      setText(text, label(Number(input.value)));
      if (slideTimer !== null) clearTimeout(slideTimer);
      // Python redraws on each message: send only where the slider comes to rest.
      slideTimer = setTimeout(() => {
        slideTimer = null;
        requests.send({ type: "plot_step", kind: item.kind, step, call });
      }, SLIDE_DELAY_MS);
    });
    return h("div", { cls: "hw-step-row" }, [input, text]);
  }

  /** @param {PlotItem} item */
  function viewButtons(item) {
    const views = Array.isArray(item.views) ? item.views : [];
    if (views.length < 2) return null;
    return h(
      "div",
      { cls: "hw-views", attrs: { role: "group", "aria-label": `how the ${item.kind} capture is drawn` } },
      views.map((view) => {
        const button = h("button", {
          cls: view === item.view ? "hw-view hw-view-active" : "hw-view",
          attrs: { type: "button", "data-view": view, "data-kind": item.kind ?? "", "aria-pressed": String(view === item.view) },
          text: view,
        });
        button.addEventListener("click", () => requests.send({ type: "plot_view", kind: item.kind, view }));
        return button;
      }),
    );
  }

  /**
   * A <select> of `options` ([value, label]) sending `plot_view` with `field` set to the chosen value.
   * @param {PlotItem} item
   * @param {string} cls
   * @param {string} label
   * @param {[string, string][]} options
   * @param {string} chosen
   * @param {"element" | "head" | "scale"} field
   * @param {(value: string) => string | number | null} parse
   */
  function picker(item, cls, label, options, chosen, field, parse) {
    const select = h(
      "select",
      { cls, attrs: { "data-kind": item.kind ?? "", "aria-label": `${label} of the ${item.kind} capture` } },
      options.map(([value, text]) => h("option", { attrs: { value, selected: value === chosen }, text })),
    );
    select.addEventListener("change", () => {
      requests.send({ type: "plot_view", kind: item.kind, [field]: parse(select.value) });
    });
    return select;
  }

  /**
   * The element picker (a tuple, dict or ModelOutput output's tensors), shown when there are several.
   * @param {PlotItem} item
   */
  function elementPicker(item) {
    const elements = Array.isArray(item.elements) ? item.elements : [];
    if (elements.length < 2) return null;
    /** @type {[string, string][]} */
    const options = elements.map((name) => [name, displayName(name)]);
    return picker(item, "hw-element", "tensor", options, item.element, "element", (value) => value);
  }

  /**
   * The head picker of the heads view: all heads, or one.
   * @param {PlotItem} item
   */
  function headPicker(item) {
    if (item.view !== "heads" || !(item.heads > 1)) return null;
    /** @type {[string, string][]} */
    const options = [["all", `all ${item.heads} heads`]];
    for (let head = 0; head < item.heads; head += 1) options.push([String(head), `head ${head}`]);
    const chosen = Number.isInteger(item.head) ? String(item.head) : "all";
    return picker(item, "hw-head", "head", options, chosen, "head", (value) => (value === "all" ? null : Number(value)));
  }

  /**
   * The colour scale picker of a view that offers several (the heads view: linear, per-row, log).
   * @param {PlotItem} item
   */
  function scalePicker(item) {
    const scales = Array.isArray(item.scales) ? item.scales : [];
    if (scales.length < 2) return null;
    /** @type {[string, string][]} */
    const options = scales.map((scale) => [scale, `${scale} scale`]);
    return picker(item, "hw-scale", "colour scale", options, item.scale ?? scales[0], "scale", (value) => value);
  }

  /** @param {PlotItem} item */
  function controls(item) {
    const parts = [elementPicker(item), viewButtons(item), headPicker(item), scalePicker(item)].filter(Boolean);
    return parts.length > 0 ? h("div", { cls: "hw-plot-controls" }, parts) : null;
  }

  // Each figure's lag mark: "step 208 of 239, updating…" while a cell's loop runs ahead of the drawn step.
  /** @type {[HTMLElement, number][]} */
  let lags = [];
  function updateLags() {
    const status = model.get("status");
    for (const [mark, step] of lags) {
      const text = lagText(step, status);
      setText(mark, text);
      mark.hidden = text === "";
    }
  }

  /** @param {PlotItem} item */
  function figure(item) {
    const lag = h("span", { cls: "hw-plot-lag hw-lagging", attrs: { hidden: true } });
    lags.push([lag, item.step]);
    const children = [
      h("figcaption", { cls: item.stale ? "hw-plot-caption hw-stale" : "hw-plot-caption", text: caption(item) }),
      lag,
    ];
    if (item.edits) {
      const note = createEditsNote(); // an analysis's item (attention heads): with or without the user's edits
      note.set(item.edits);
      children.push(note.el);
    }
    const row = controls(item);
    if (row) children.push(row);
    const steps = slider(item);
    if (steps) children.push(steps);
    const shown = createFigure({ cls: "hw-plot", figure: item.kind ?? "", kind: item.kind ?? "", alt: caption(item) });
    shown.show(images, item.png, item.hover);
    children.push(shown.img.hidden ? h("div", { cls: "hw-plot-missing", text: "No image data." }) : shown.el);
    return h("figure", { cls: "hw-figure", attrs: { "data-kind": item.kind ?? "" } }, children);
  }

  function update() {
    const plots = model.get("plots") ?? {};
    const match = plots.path === model.get("selected");
    // A selection change that does not change what is shown keeps the images (no flicker).
    if (plots === shown.plots && match === shown.match) return;
    shown = { plots, match };
    images.revoke();
    lags = [];
    const items = match && Array.isArray(plots.items) ? plots.items : [];
    if (items.length === 0) {
      el.replaceChildren(h("div", { cls: "hw-hint", text: HINT }));
      return;
    }
    el.replaceChildren(...items.map(figure));
    updateLags();
  }

  const offs = [subscribe(model, ["change:plots", "change:selected"], update), subscribe(model, ["change:status"], updateLags)];
  update();
  return {
    el,
    destroy() {
      offs.forEach((off) => off());
      if (slideTimer !== null) clearTimeout(slideTimer);
      images.revoke();
    },
  };
}
