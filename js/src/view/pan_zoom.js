/** Pan (drag) and zoom (wheel) of an SVG layer through its transform; a drag swallows the click that ends it. */

import { READABLE_SCALE, fitTransform, wholeTransform } from "../graph/viewport.js";
import { listen } from "./dom.js";

const MIN_SCALE = 0.05;
const MAX_SCALE = 3;
const DRAG_THRESHOLD = 4; // px: below it a press is a click, not a pan

/** @typedef {import("../graph/viewport.js").Bounds} Bounds */

/**
 * Pan/zoom controller for `layer` inside `svg`; `onChange` runs after every move. Returns
 * {fit, fitWhole, centerOn, panTo, isVisible, transform, size, destroy}.
 * @param {SVGSVGElement} svg
 * @param {SVGGElement} layer
 * @param {{onChange?: () => void}} [options]
 */
export function createPanZoom(svg, layer, { onChange = () => {} } = {}) {
  let x = 0;
  let y = 0;
  let k = 1;
  /** @type {{startX: number, startY: number, x: number, y: number, id: number} | null} */
  let drag = null;
  let dragged = false;
  /** @type {[Bounds, number[] | null | "whole"] | null} */
  let fitted = null; // [bounds, focus or "whole"] of the last fit, until the user moves: a resize fits again

  const apply = () => {
    layer.setAttribute("transform", `translate(${x.toFixed(1)},${y.toFixed(1)}) scale(${k.toFixed(4)})`);
    onChange();
  };
  // The canvas size is cached from a ResizeObserver: reading clientWidth after the page changed
  // would force a style and layout pass of the whole notebook.
  /** @type {{width: number, height: number} | null} */
  let known = null;
  const resize =
    typeof ResizeObserver === "function"
      ? new ResizeObserver(([entry]) => {
          const next = { width: entry.contentRect.width, height: entry.contentRect.height };
          const old = known;
          known = next;
          if (!next.width || !next.height || (old && old.width === next.width && old.height === next.height)) return;
          if (fitted?.[1] === "whole") fitWhole(fitted[0]);
          else if (fitted) fit(fitted[0], fitted[1]);
          else if (old?.width) {
            // Keep what was in the middle of the view in the middle.
            x += (next.width - old.width) / 2;
            y += (next.height - old.height) / 2;
            apply();
          }
        })
      : null;
  resize?.observe(svg);
  const size = () => (known?.width ? known : { width: svg.clientWidth || 800, height: svg.clientHeight || 480 });

  /**
   * Show `bounds` at a readable scale: all of it when it fits, else around `focus` ([x, y]) or its top.
   * @param {Bounds} bounds
   * @param {number[] | null} [focus]
   */
  function fit(bounds, focus = null) {
    const next = fitTransform(bounds, size(), focus);
    ({ x, y, k } = next);
    fitted = [bounds, focus];
    apply();
    return next;
  }

  /**
   * Show all of `bounds`, centred, whatever the scale (the Fit button).
   * @param {Bounds} bounds
   */
  function fitWhole(bounds) {
    ({ x, y, k } = wholeTransform(bounds, size()));
    fitted = [bounds, "whole"];
    apply();
  }

  /**
   * Centre the view on a layout point, at scale `zoom` (the current one by default).
   * @param {number} cx
   * @param {number} cy
   */
  function centre(cx, cy, zoom = k) {
    const { width, height } = size();
    k = zoom;
    x = width / 2 - cx * k;
    y = height / 2 - cy * k;
    fitted = null;
    apply();
  }

  /** @param {WheelEvent} event */
  function onWheel(event) {
    event.preventDefault();
    const box = svg.getBoundingClientRect();
    const px = event.clientX - box.left;
    const py = event.clientY - box.top;
    const next = Math.min(MAX_SCALE, Math.max(MIN_SCALE, k * Math.exp(-event.deltaY * 0.0015)));
    // Keep the point under the cursor where it is.
    x = px - ((px - x) * next) / k;
    y = py - ((py - y) * next) / k;
    k = next;
    fitted = null;
    apply();
  }

  /** @param {PointerEvent} event */
  function onDown(event) {
    if (event.button !== 0) return;
    drag = { startX: event.clientX, startY: event.clientY, x, y, id: event.pointerId };
    dragged = false;
  }

  /** @param {PointerEvent} event */
  function onMove(event) {
    if (!drag || event.pointerId !== drag.id) return;
    const dx = event.clientX - drag.startX;
    const dy = event.clientY - drag.startY;
    if (!dragged && Math.hypot(dx, dy) < DRAG_THRESHOLD) return;
    if (!dragged) {
      dragged = true;
      svg.setPointerCapture?.(drag.id);
      svg.classList.add("hw-panning");
    }
    x = drag.x + dx;
    y = drag.y + dy;
    fitted = null;
    apply();
  }

  /** @param {PointerEvent} event */
  function onUp(event) {
    if (!drag || event.pointerId !== drag.id) return;
    if (dragged) svg.releasePointerCapture?.(drag.id);
    svg.classList.remove("hw-panning");
    drag = null;
  }

  /** @param {MouseEvent} event */
  function onClickCapture(event) {
    if (!dragged) return;
    dragged = false;
    event.stopImmediatePropagation(); // the press was a pan, not a click on what it started on
  }

  const offs = [
    listen(svg, "pointerdown", onDown),
    listen(svg, "pointermove", onMove),
    listen(svg, "pointerup", onUp),
    listen(svg, "pointercancel", onUp),
  ];
  svg.addEventListener("wheel", onWheel, { passive: false });
  svg.addEventListener("click", onClickCapture, true);
  layer.setAttribute("transform", "translate(0,0) scale(1)");

  return {
    fit,
    fitWhole,
    /**
     * Centre the view on a layout point, zooming in to a readable scale when far out.
     * @param {number} cx
     * @param {number} cy
     */
    centerOn(cx, cy) {
      centre(cx, cy, Math.max(k, READABLE_SCALE));
    },
    /**
     * Centre the view on a layout point at the current scale (the minimap's pan).
     * @param {number} cx
     * @param {number} cy
     */
    panTo(cx, cy) {
      centre(cx, cy);
    },
    /** The current transform {x, y, k}: screen = layout × k + (x, y). */
    transform: () => ({ x, y, k }),
    size,
    /**
     * Whether a layout rect [cx, cy, w, h] lies wholly inside the view.
     * @param {number[]} rect
     */
    isVisible([cx, cy, w, h]) {
      const { width, height } = size();
      const left = x + (cx - w / 2) * k;
      const top = y + (cy - h / 2) * k;
      return left >= 0 && top >= 0 && left + w * k <= width && top + h * k <= height && k >= READABLE_SCALE - 1e-6;
    },
    destroy() {
      resize?.disconnect();
      for (const off of offs) off();
      svg.removeEventListener("wheel", onWheel);
      svg.removeEventListener("click", onClickCapture, true);
    },
  };
}
