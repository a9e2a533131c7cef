/** Plots area: the PNG captures of the selected module as Blob-URL images with captions. */

import { toBytes } from "../bytes.js";
import { formatShape } from "../format.js";
import { h, subscribe } from "./dom.js";

const HINT = "Attach a forward or grad hook and press Run to see captures.";

/** Caption text of one plot item: "title · 1×16×32×32 · step 3". */
function caption(item) {
  const parts = [item.title || item.kind || "capture"];
  if (Array.isArray(item.shape)) parts.push(formatShape(item.shape));
  if (Number.isFinite(item.step)) parts.push(`step ${item.step}`);
  return parts.join(" · ");
}

/** Build the plots area for `model`; returns {el, destroy}. */
export function createPlots(model) {
  const el = h("div", { cls: "hw-plots" });
  let urls = [];
  let shown = { plots: undefined, match: undefined };

  function revokeAll() {
    for (const url of urls) URL.revokeObjectURL(url);
    urls = [];
  }

  function figure(item) {
    const bytes = toBytes(item.png);
    const children = [h("figcaption", { cls: "hw-plot-caption", text: caption(item) })];
    if (bytes && bytes.byteLength > 0) {
      const url = URL.createObjectURL(new Blob([bytes], { type: "image/png" }));
      urls.push(url);
      children.push(
        h("img", { cls: "hw-plot", attrs: { "data-kind": item.kind ?? "", alt: caption(item), src: url } }),
      );
    } else {
      children.push(h("div", { cls: "hw-plot-missing", text: "No image data." }));
    }
    return h("figure", { cls: "hw-figure", attrs: { "data-kind": item.kind ?? "" } }, children);
  }

  function update() {
    const plots = model.get("plots") ?? {};
    const match = plots.target === model.get("selected");
    // A selection change that does not change what is shown keeps the images (no flicker).
    if (plots === shown.plots && match === shown.match) return;
    shown = { plots, match };
    revokeAll();
    const items = match && Array.isArray(plots.items) ? plots.items : [];
    if (items.length === 0) {
      el.replaceChildren(h("div", { cls: "hw-hint", text: HINT }));
      return;
    }
    el.replaceChildren(...items.map(figure));
  }

  const off = subscribe(model, ["change:plots", "change:selected"], update);
  update();
  return {
    el,
    destroy() {
      off();
      revokeAll();
    },
  };
}
