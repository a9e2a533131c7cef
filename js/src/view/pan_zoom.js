/** Pan (drag) and zoom (wheel) of an SVG layer through its transform; a drag swallows the click that ends it. */

import { listen } from "./dom.js";

const MIN_SCALE = 0.05;
const MAX_SCALE = 3;
const DRAG_THRESHOLD = 4; // px: below it a press is a click, not a pan

/** Pan/zoom controller for `layer` inside `svg`; returns {fit, centerOn, isVisible, destroy}. */
export function createPanZoom(svg, layer) {
  let x = 0;
  let y = 0;
  let k = 1;
  let drag = null;
  let dragged = false;

  const apply = () => layer.setAttribute("transform", `translate(${x.toFixed(1)},${y.toFixed(1)}) scale(${k.toFixed(4)})`);
  // The canvas size is cached from a ResizeObserver: reading clientWidth after the page changed
  // would force a style and layout pass of the whole notebook.
  let known = null;
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(([entry]) => {
    known = { width: entry.contentRect.width, height: entry.contentRect.height };
  }) : null;
  resize?.observe(svg);
  const size = () => (known?.width ? known : { width: svg.clientWidth || 800, height: svg.clientHeight || 480 });

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
    apply();
  }

  function onDown(event) {
    if (event.button !== 0) return;
    drag = { startX: event.clientX, startY: event.clientY, x, y, id: event.pointerId };
    dragged = false;
  }

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
    apply();
  }

  function onUp(event) {
    if (!drag || event.pointerId !== drag.id) return;
    if (dragged) svg.releasePointerCapture?.(drag.id);
    svg.classList.remove("hw-panning");
    drag = null;
  }

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
  apply();

  return {
    /** Scale and centre the whole drawing ({x, y, width, height} in layout units) in the view. */
    fit(bounds) {
      const { width, height } = size();
      const pad = 16;
      k = Math.min(1.2, Math.max(MIN_SCALE, Math.min((width - pad) / (bounds.width || 1), (height - pad) / (bounds.height || 1))));
      x = width / 2 - (bounds.x + bounds.width / 2) * k;
      y = height / 2 - (bounds.y + bounds.height / 2) * k;
      apply();
    },
    /** Centre the view on a layout point, zooming in to a readable scale when far out. */
    centerOn(cx, cy) {
      const { width, height } = size();
      k = Math.max(k, 0.6);
      x = width / 2 - cx * k;
      y = height / 2 - cy * k;
      apply();
    },
    /** Whether a layout rect [cx, cy, w, h] lies wholly inside the view. */
    isVisible([cx, cy, w, h]) {
      const { width, height } = size();
      const left = x + (cx - w / 2) * k;
      const top = y + (cy - h / 2) * k;
      return left >= 0 && top >= 0 && left + w * k <= width && top + h * k <= height && k >= 0.5;
    },
    destroy() {
      resize?.disconnect();
      for (const off of offs) off();
      svg.removeEventListener("wheel", onWheel, { passive: false });
      svg.removeEventListener("click", onClickCapture, true);
    },
  };
}
