/** Tells the kernel the figure pane's width and the screen's pixel ratio (the `frame` traitlet), when the view
 * renders and whenever either changes, as theme_sync.js tells it the theme: figures are drawn for them. */

import { frameChanged, measuredFrame } from "../frame.js";

const DEBOUNCE_MS = 150;

/**
 * The content width of `pane`'s shown tab page (CSS px): what a figure in it may take.
 * @param {HTMLElement} pane
 */
function contentWidth(pane) {
  const page = /** @type {HTMLElement | null} */ (pane.querySelector(":scope > .hw-tab-page:not([hidden])"));
  const box = page ?? pane;
  const style = getComputedStyle(box);
  return box.clientWidth - (parseFloat(style.paddingLeft) || 0) - (parseFloat(style.paddingRight) || 0);
}

/**
 * Write `pane`'s frame into `model` now, on each resize (debounced) and on each change of devicePixelRatio.
 * @param {import("../widget_model.js").WidgetModel} model
 * @param {HTMLElement} pane the details pane (`.hw-details`)
 */
export function createFrameSync(model, pane) {
  /** @type {ReturnType<typeof setTimeout> | null} */
  let timer = null;
  const report = () => {
    timer = null;
    if (!pane.isConnected) return;
    const next = measuredFrame(contentWidth(pane), window.devicePixelRatio);
    if (!frameChanged(model.get("frame"), next)) return;
    model.set("frame", next);
    model.save_changes();
  };
  const later = () => {
    if (timer !== null) clearTimeout(timer);
    timer = setTimeout(report, DEBOUNCE_MS);
  };
  const observer = typeof ResizeObserver === "undefined" ? null : new ResizeObserver(later);
  observer?.observe(pane);
  // A ratio change (browser zoom, a window dragged to another screen) matches no longer the query of the old one.
  /** @type {MediaQueryList | null} */
  let query = null;
  const onRatio = () => {
    watchRatio();
    later();
  };
  function watchRatio() {
    query?.removeEventListener("change", onRatio);
    query = typeof matchMedia === "undefined" ? null : matchMedia(`(resolution: ${window.devicePixelRatio}dppx)`);
    query?.addEventListener("change", onRatio);
  }
  watchRatio();
  const frame = requestAnimationFrame(report); // once the pane is laid out
  return {
    destroy() {
      cancelAnimationFrame(frame);
      if (timer !== null) clearTimeout(timer);
      observer?.disconnect();
      query?.removeEventListener("change", onRatio);
    },
  };
}
