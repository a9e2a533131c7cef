/** The graph's minimap: the whole layout small, the view's rectangle on it; a press or drag on it pans the view there. */

import { minimapPoint, minimapSize, minimapViewport, overflows } from "../graph/viewport.js";
import { listen } from "./dom.js";
import { s } from "./graph_svg.js";

const MAX = { width: 160, height: 120 };

const round = (v) => Math.round(v * 10) / 10;

/** Minimap for a pan/zoom controller (`panZoom`); returns {el, draw(layout), update(), destroy}. */
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
  let bounds = null;
  let map = null;
  let pressed = null;

  /** Draw the layout's boxes and items, each one rectangle of a single path. */
  function draw(layout, boxKeys) {
    bounds = layout;
    map = minimapSize(layout, MAX);
    el.setAttribute("width", round(map.width));
    el.setAttribute("height", round(map.height));
    const rect = ([cx, cy, w, h]) => {
      const x = (cx - w / 2 - layout.x) * map.sx;
      const y = (cy - h / 2 - layout.y) * map.sy;
      const width = round(Math.max(1, w * map.sx));
      return `M${round(x)},${round(y)}h${width}v${round(Math.max(1, h * map.sy))}h${-width}Z`;
    };
    const boxPaths = [];
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
    const r = minimapViewport(bounds, transform, size, map);
    view.setAttribute("x", round(r.x));
    view.setAttribute("y", round(r.y));
    view.setAttribute("width", round(Math.max(2, r.width)));
    view.setAttribute("height", round(Math.max(2, r.height)));
  }

  function clear() {
    bounds = null;
    update();
  }

  function panAt(event) {
    const box = el.getBoundingClientRect();
    const [x, y] = minimapPoint(bounds, map, event.clientX - box.left, event.clientY - box.top);
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
