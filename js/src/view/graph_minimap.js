/** The graph's minimap: the whole layout small, the view's rectangle on it; a press or drag on it pans the view there. */

import { minimapPoint, minimapSize, minimapViewport, overflows } from "../graph/viewport.js";
import { listen } from "./dom.js";
import { s } from "./graph_svg.js";

const MAX = { width: 160, height: 120 };

/** @typedef {import("../graph/viewport.js").Bounds} Bounds */
/** @typedef {import("../graph/viewport.js").MapSize} MapSize */

const round = (/** @type {number} */ v) => Math.round(v * 10) / 10;

/**
 * Minimap for a pan/zoom controller (`panZoom`); returns {el, draw(layout), update(), destroy}.
 * @param {ReturnType<typeof import("./pan_zoom.js").createPanZoom>} panZoom
 */
export function createMinimap(panZoom) {
  const boxes = s("path", { class: "hw-gminimap-boxes" });
  const items = s("path", { class: "hw-gminimap-items" });
  const view = s("rect", { class: "hw-gminimap-view" });
  const el = s("svg", { class: "hw-graph-minimap", role: "img", "aria-label": "minimap: where the view is in the graph" }, [
    s("title", {}, [], "Where the view is in the whole graph: press or drag to move it"),
    boxes,
    items,
    view,
  ]);
  el.setAttribute("hidden", "");
  /** @type {Bounds | null} */
  let bounds = null;
  /** @type {MapSize | null} */
  let map = null;
  /** @type {number | null} */
  let pressed = null;

  /**
   * Draw the layout's boxes and items, each one rectangle of a single path.
   * @param {import("../graph/layout.js").Layout} layout
   * @param {Set<string>} boxKeys
   */
  function draw(layout, boxKeys) {
    bounds = layout;
    const size = minimapSize(layout, MAX);
    map = size;
    el.setAttribute("width", String(round(size.width)));
    el.setAttribute("height", String(round(size.height)));
    /** @type {(rect: number[]) => string} */
    const rect = ([cx, cy, w, h]) => {
      const x = (cx - w / 2 - layout.x) * size.sx;
      const y = (cy - h / 2 - layout.y) * size.sy;
      const width = round(Math.max(1, w * size.sx));
      return `M${round(x)},${round(y)}h${width}v${round(Math.max(1, h * size.sy))}h${-width}Z`;
    };
    /** @type {string[]} */
    const boxPaths = [];
    /** @type {string[]} */
    const itemPaths = [];
    for (const [key, position] of Object.entries(layout.positions)) (boxKeys.has(key) ? boxPaths : itemPaths).push(rect(position));
    boxes.setAttribute("d", boxPaths.join(""));
    items.setAttribute("d", itemPaths.join(""));
    update();
  }

  /** Move the view's rectangle; shown only while part of the graph is outside the view. */
  function update() {
    if (!bounds) {
      el.setAttribute("hidden", "");
      return;
    }
    const size = panZoom.size();
    const transform = panZoom.transform();
    const outside = overflows(bounds, transform, size);
    if (outside) el.removeAttribute("hidden");
    else el.setAttribute("hidden", "");
    if (!outside) return;
    const r = minimapViewport(bounds, transform, size, /** @type {MapSize} */ (map)); // drawn with its bounds
    view.setAttribute("x", String(round(r.x)));
    view.setAttribute("y", String(round(r.y)));
    view.setAttribute("width", String(round(Math.max(2, r.width))));
    view.setAttribute("height", String(round(Math.max(2, r.height))));
  }

  function clear() {
    bounds = null;
    update();
  }

  /** @param {PointerEvent} event only while a layout is drawn */
  function panAt(event) {
    const box = el.getBoundingClientRect();
    const at = [event.clientX - box.left, event.clientY - box.top];
    const [x, y] = minimapPoint(/** @type {Bounds} */ (bounds), /** @type {MapSize} */ (map), at[0], at[1]);
    panZoom.panTo(x, y);
  }

  const offs = [
    listen(el, "pointerdown", (event) => {
      if (!bounds || event.button !== 0) return;
      event.preventDefault();
      event.stopPropagation();
      pressed = event.pointerId;
      el.setPointerCapture?.(pressed);
      panAt(event);
    }),
    listen(el, "pointermove", (event) => {
      if (pressed === event.pointerId) panAt(event);
    }),
    listen(el, "pointerup", (event) => {
      if (pressed !== event.pointerId) return;
      el.releasePointerCapture?.(pressed);
      pressed = null;
    }),
    listen(el, "click", (event) => event.stopPropagation()),
  ];

  return {
    el,
    draw,
    update,
    clear,
    destroy() {
      for (const off of offs) off();
    },
  };
}
