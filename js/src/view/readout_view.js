/** Every figure `<img>` of the view: shown at its CSS size (natural size / pixel ratio), crisp, with the value under
 * the mouse (or the arrow keys) in its `.hw-readout`, read from the figure's `Hover` without asking the kernel. */

import { decodeHover, highlight, locate, move, readout } from "../readout.js";
import { h, setAttr, setText } from "./dom.js";

/** @typedef {import("../payloads.js").Hover} Hover */
/** @typedef {import("../readout.js").Spot} Spot */

const KEYS = new Set(["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown"]);

/**
 * Set attribute `name` of `node` to `value`, or remove it for null.
 * @param {Element} node
 * @param {string} name
 * @param {string | null} value
 */
function attr(node, name, value) {
  if (value === null) node.removeAttribute(name);
  else setAttr(node, name, value);
}

/**
 * A figure: a focusable box holding the image, the outline of the cell or point read, and the readout line.
 * `show(images, png, hover)` puts a PNG in it (hidden without one); the readout follows the mouse and, when the
 * box is focused, the arrow keys (from cell (0, 0) of region 0).
 * @param {{cls: string, figure: string, alt: string, kind?: string}} options `cls`: the image's classes;
 *   `figure`: its `data-figure`; `kind`: its `data-kind` (the inspector's plots)
 */
export function createFigure({ cls, figure, alt, kind }) {
  const img = h("img", { cls, attrs: { alt, "data-figure": figure, "data-kind": kind ?? null, hidden: true } });
  const mark = h("div", { cls: "hw-readout-box", attrs: { hidden: true, "aria-hidden": "true" } });
  const line = h("div", { cls: "hw-readout", attrs: { "aria-live": "polite" } });
  const el = h("div", { cls: "hw-figure-box", attrs: { tabindex: 0, hidden: true } }, [
    img,
    mark,
    line,
  ]);
  /** @type {Hover | null} */
  let hover = null;
  /** @type {import("../readout.js").Decoded[]} */
  let decoded = [];
  /** @type {Spot | null} */
  let spot = null;

  /** The image's CSS pixels per figure CSS pixel: below 1 when max-width shrinks it to its box. */
  function scale() {
    return hover && hover.width > 0 && img.clientWidth > 0 ? img.clientWidth / hover.width : 1;
  }

  /** @param {Spot | null} at */
  function showSpot(at) {
    spot = at;
    const said = at ? readout(decoded, at) : null;
    setText(line, said?.text ?? "");
    attr(line, "data-region", at ? String(at.region) : null);
    const lines = at !== null && decoded[at.region]?.type === "lines";
    attr(line, "data-row", at && !lines ? String(at.row) : null);
    attr(line, "data-col", at && !lines ? String(at.col) : null);
    attr(line, "data-index", at && lines ? String(at.index) : null);
    attr(line, "data-value", said && said.value !== null ? String(said.value) : null);
    const box = at ? highlight(decoded, at) : null;
    mark.hidden = !box;
    if (box) {
      const s = scale();
      Object.assign(mark.style, {
        left: `${img.offsetLeft + box.left * s}px`,
        top: `${img.offsetTop + box.top * s}px`,
        width: `${Math.max(1, box.width * s)}px`,
        height: `${Math.max(1, box.height * s)}px`,
      });
    }
  }

  /** @param {MouseEvent} event */
  function onMove(event) {
    if (decoded.length === 0) return;
    const rect = img.getBoundingClientRect();
    if (rect.width === 0) return;
    const s = scale();
    const at = locate(decoded, (event.clientX - rect.left) / s, (event.clientY - rect.top) / s);
    if (at) showSpot(at);
  }

  /** @param {KeyboardEvent} event */
  function onKey(event) {
    if (!KEYS.has(event.key) || decoded.length === 0) return;
    event.preventDefault(); // the pane does not scroll while the readout moves
    showSpot(spot ? move(decoded, spot, event.key) : { region: 0, row: 0, col: 0, index: 0 });
  }

  function onFocus() {
    if (!spot && decoded.length > 0) showSpot({ region: 0, row: 0, col: 0, index: 0 });
  }

  function size() {
    const ratio = hover && hover.ratio > 0 ? hover.ratio : 1;
    img.dataset.ratio = String(ratio); // what the page (and a test) divides the natural size by
    if (img.naturalWidth > 0) img.style.width = `${img.naturalWidth / ratio}px`;
    else if (hover) img.style.width = `${hover.width}px`; // until it loads: the figure's own size
  }

  img.addEventListener("load", size);
  el.addEventListener("mousemove", onMove);
  el.addEventListener("keydown", onKey);
  el.addEventListener("focus", onFocus);

  return {
    el,
    img,
    /**
     * @param {{url(png: DataView | null | undefined): string | null}} images where its Blob URL comes from
     * @param {DataView | null | undefined} png
     * @param {Hover | null | undefined} next
     */
    show(images, png, next) {
      const url = images.url(png);
      el.hidden = !url;
      img.hidden = !url;
      if (next !== hover) {
        hover = next ?? null;
        decoded = decodeHover(hover); // once per payload, not per mouse move
        spot = null;
        showSpot(null);
      }
      img.classList.toggle("hw-pixelated", Boolean(hover?.pixelated));
      if (url) {
        img.src = url;
        size();
      } else {
        img.removeAttribute("src");
      }
    },
  };
}
