/** Patching panel: clean and corrupted inputs typed in the page and a sweep started from it (or from
 * `ex.patch_sweep()`), its progress, then its layers × positions figure with the positions that differ marked. */

import { h, listen, pngUrls, setAttr, setText, subscribe } from "./dom.js";
import { createEditsNote } from "./edits_note.js";
import { createFigure } from "./readout_view.js";

/** The metrics the page offers (patching_inputs.METRIC_CHOICES), the first the default. */
const METRICS = [
  ["recovered", "fraction of the logit difference recovered (0 corrupted, 1 clean)"],
  ["logit_diff", "logit difference (clean answer − corrupted answer), minus the corrupted run's"],
];
/** What each box holds, by `patching.mode`. */
const MODES = {
  text: { clean: "the clean text", unit: "text" },
  ids: { clean: "the clean token ids, apart by spaces", unit: "token ids" },
};

/**
 * Build the patching panel for `model` (hidden where no sweep can start from the page and none was shown), sending
 * through `requests`; returns {el, destroy}.
 * @param {import("../widget_model.js").WidgetModel} model
 * @param {import("../widget_model.js").Requests} requests
 */
export function createPatchingView(model, requests) {
  const clean = h("input", { cls: "hw-patching-clean", attrs: { type: "text", spellcheck: "false" } });
  const corrupted = h("input", { cls: "hw-patching-corrupted", attrs: { type: "text", spellcheck: "false" } });
  const metric = h(
    "select",
    { cls: "hw-patching-metric", attrs: { "aria-label": "what the sweep measures" } },
    METRICS.map(([value, label]) => h("option", { attrs: { value }, text: label })),
  );
  const run = h("button", {
    cls: "hw-patching-run",
    attrs: { type: "button", title: "Patch each block's clean activation into the corrupted run, at each position" },
    text: "Patch sweep",
  });
  const cleanLabel = h("label", { cls: "hw-patching-field" }, [h("span", { text: "clean" }), clean]);
  const corruptedLabel = h("label", { cls: "hw-patching-field" }, [h("span", { text: "corrupted" }), corrupted]);
  const form = h("div", { cls: "hw-patching-form" }, [
    cleanLabel,
    corruptedLabel,
    h("div", { cls: "hw-summary-bar" }, [metric, run]),
  ]);
  const reason = h("div", { cls: "hw-hint hw-patching-reason" });
  const progress = h("progress", { cls: "hw-patching-progress", attrs: { hidden: true, "aria-label": "patch sweep" } });
  const error = h("div", { cls: "hw-attr-error hw-patching-error", attrs: { role: "alert" } });
  const edits = createEditsNote();
  const tokens = h("div", { cls: "hw-token-row hw-patching-tokens", attrs: { hidden: true, "aria-label": "the clean tokens" } });
  const caption = h("div", { cls: "hw-hint hw-patching-caption" });
  const image = createFigure({ cls: "hw-patching-image", figure: "patching", alt: "patch sweep: layers × positions" });
  const el = h("details", { cls: "hw-patching-panel", attrs: { open: true, hidden: true } }, [
    h("summary", { cls: "hw-section-title", text: "Activation patching" }),
    form,
    reason,
    progress,
    error,
    edits.el,
    tokens,
    caption,
    image.el, // drawn for the pane's width: it fits
  ]);
  const images = pngUrls();
  /** The boxes' contents the kernel last sent: a box is refilled only when they change (what is typed stays). */
  const sent = { clean: /** @type {string | null} */ (null), corrupted: /** @type {string | null} */ (null) };

  /** @param {Partial<import("../payloads.js").Patching>} patching */
  function updateForm(patching) {
    form.hidden = !patching.available;
    setText(reason, patching.available ? "" : (patching.reason ?? ""));
    reason.hidden = Boolean(patching.available) || !patching.reason;
    const mode = MODES[/** @type {"text" | "ids"} */ (patching.mode)] ?? MODES.ids;
    setAttr(clean, "placeholder", mode.clean);
    setAttr(corrupted, "placeholder", patching.hint || `the corrupted ${mode.unit}, as many tokens`);
    for (const [box, key] of /** @type {const} */ ([[clean, "clean"], [corrupted, "corrupted"]])) {
      const value = String(patching[key] ?? "");
      if (sent[key] !== value) box.value = value;
      sent[key] = value;
    }
    if (METRICS.some(([value]) => value === patching.metric)) metric.value = String(patching.metric);
  }

  /**
   * The swept clean tokens, each position where clean and corrupted differ marked.
   * @param {string[]} labels
   * @param {number[]} differs
   */
  function updateTokens(labels, differs) {
    const marked = new Set(differs);
    tokens.replaceChildren(
      ...labels.map((label, i) =>
        h("span", {
          cls: marked.has(i) ? "hw-token hw-patching-token hw-differs" : "hw-token hw-patching-token",
          attrs: {
            "data-position": String(i),
            title: marked.has(i) ? `position ${i}: differs in the corrupted input` : `position ${i}`,
          },
          text: label,
        }),
      ),
    );
    tokens.hidden = labels.length === 0;
  }

  function update() {
    const patching = model.get("patching") ?? {};
    const counts = Array.isArray(patching.progress) ? patching.progress : null; // [done, total] while a sweep runs
    const running = counts !== null;
    el.hidden = !(patching.available || running || patching.png || patching.error);
    updateForm(patching);
    run.disabled = running;
    progress.hidden = !running;
    if (counts) {
      const [done, total] = counts;
      progress.max = Math.max(1, total);
      progress.value = done;
      setAttr(progress, "title", `${done} of ${total} patched positions`);
    }
    setText(error, patching.error ?? "");
    edits.set(patching.edits);
    updateTokens(patching.png ? (patching.tokens ?? []) : [], patching.differs ?? []);
    setText(caption, counts ? `${counts[0]} of ${counts[1]} patched positions…` : (patching.caption ?? ""));
    images.revoke();
    image.show(images, patching.png, patching.hover);
  }

  function onRun() {
    run.disabled = true; // until the sweep's progress or its reply says how it went
    requests
      .send({ type: "patch", clean: clean.value, corrupted: corrupted.value, metric: metric.value })
      .then(() => {
        run.disabled = Array.isArray(model.get("patching")?.progress);
      });
  }

  const offs = [
    subscribe(model, ["change:patching"], update),
    listen(run, "click", onRun),
    listen(form, "keydown", (/** @type {KeyboardEvent} */ event) => {
      if (event.key === "Enter" && event.target instanceof HTMLInputElement) onRun(); // as a form submits
    }),
  ];
  update();
  return {
    el,
    destroy() {
      offs.forEach((off) => off());
      images.revoke();
    },
  };
}
