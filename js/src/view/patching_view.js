/** Patching panel: the last `ex.patch_sweep()`'s layers × positions figure, and its progress while it runs. */

import { h, pngUrls, setAttr, setText, subscribe } from "./dom.js";
import { createFigure } from "./readout_view.js";

/**
 * Build the patching panel for `model` (hidden until a sweep starts); returns {el, destroy}.
 * @param {import("../widget_model.js").WidgetModel} model
 */
export function createPatchingView(model) {
  const progress = h("progress", { cls: "hw-patching-progress", attrs: { hidden: true, "aria-label": "patch sweep" } });
  const caption = h("div", { cls: "hw-hint hw-patching-caption" });
  const error = h("div", { cls: "hw-attr-error hw-patching-error", attrs: { role: "alert" } });
  const image = createFigure({ cls: "hw-patching-image", figure: "patching", alt: "patch sweep: layers × positions" });
  const el = h("details", { cls: "hw-patching-panel", attrs: { open: true, hidden: true } }, [
    h("summary", { cls: "hw-section-title", text: "Activation patching" }),
    progress,
    error,
    caption,
    image.el, // drawn for the pane's width: it fits
  ]);
  const images = pngUrls();

  function update() {
    const patching = model.get("patching") ?? {};
    const counts = Array.isArray(patching.progress) ? patching.progress : null; // [done, total] while a sweep runs
    const running = counts !== null;
    el.hidden = !(running || patching.png || patching.error);
    progress.hidden = !running;
    if (counts) {
      const [done, total] = counts;
      progress.max = Math.max(1, total);
      progress.value = done;
      setAttr(progress, "title", `${done} of ${total} patched positions`);
    }
    setText(error, patching.error ?? "");
    setText(caption, counts ? `${counts[0]} of ${counts[1]} patched positions…` : (patching.caption ?? ""));
    images.revoke();
    image.show(images, patching.png, patching.hover);
  }

  const off = subscribe(model, ["change:patching"], update);
  update();
  return {
    el,
    destroy() {
      off();
      images.revoke();
    },
  };
}
