/** Draws a laid-out graph as SVG: boxes, edges, nodes, blocks and hook badges; strings only as text or attributes. */

import { displayPath, visibleText } from "../format.js";
import { badgeLabel } from "../kinds.js";
import { BOX_LABEL, SMALL_CHAR_WIDTH, blockDetail, itemLabel, labelRoom, smallRoom } from "../graph/layout_request.js";
import { ellipsize } from "../graph/text.js";

const SVG = "http://www.w3.org/2000/svg";

/** @typedef {import("../graph/model.js").GraphModel} GraphModel */
/** @typedef {import("../graph/layout.js").Rect} Rect */
/** What is drawn, by key: the element and its rectangle. @typedef {Map<string, {el: SVGGElement, rect: Rect}>} Drawn */

/**
 * Tooltip of a drawn item: a node's full label and title (saved tensors), or a cluster's path and what a click does.
 * @param {GraphModel} model
 * @param {string} key
 */
export function tooltip(model, key) {
  const index = Number(key.slice(1));
  if (key[0] === "n") {
    const node = model.nodes[index];
    if (!node) return "";
    // The label may be cut short in its box: the tooltip always has it whole.
    return node.title?.includes(node.label) ? node.title : [node.label, node.title].filter(Boolean).join("\n");
  }
  const cluster = model.clusters[index];
  if (!cluster) return "";
  const count = `${cluster.total.toLocaleString("en-US")} node${cluster.total === 1 ? "" : "s"}`;
  return `${displayPath(cluster.path)}\n${count} — click to expand (shift: every level) or collapse`;
}

/**
 * Give the drawn item `el` its `<title>` tooltip when it has none yet (made on first hover, not per draw).
 * @param {Element} el
 * @param {string} text
 */
export function ensureTooltip(el, text) {
  if (!el.querySelector(":scope > title")) el.prepend(s("title", {}, [], text));
}

/**
 * Create an SVG element with attributes (null/undefined skipped), optional text (escaped as dom.js escapes it) and children.
 * @template {keyof SVGElementTagNameMap} K
 * @param {K} tag
 * @param {Record<string, import("./dom.js").AttrValue>} [attrs]
 * @param {(Node | null | undefined)[]} [children]
 * @param {unknown} [text]
 * @returns {SVGElementTagNameMap[K]}
 */
export function s(tag, attrs = {}, children = [], text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined && value !== false) node.setAttribute(name, String(value));
  }
  if (text !== null) node.textContent = visibleText(text);
  for (const child of children) if (child) node.append(child);
  return node;
}

const round = (/** @type {number} */ v) => Math.round(v * 10) / 10;

/** @param {number[][]} points */
function edgePath(points) {
  if (!points.length) return "";
  return points.map(([x, y], i) => `${i ? "L" : "M"}${round(x)},${round(y)}`).join(" ");
}

/**
 * @param {GraphModel} model
 * @param {import("../graph/visible.js").Box} box
 * @param {Rect} rect
 */
function boxElement(model, box, [cx, cy, w, h]) {
  const cluster = model.clusters[box.index];
  const x = cx - w / 2;
  const y = cy - h / 2;
  return s("g", { class: "hw-gbox", "data-key": box.key, "data-path": cluster.path, "data-expanded": "true" }, [
    s("rect", { class: "hw-gbox-frame", x: round(x), y: round(y), width: round(w), height: round(h), rx: 5 }),
    s("text", { class: "hw-gbox-label", x: round(x + 6), y: round(y + BOX_LABEL - 3) }, [], ellipsize(`▾ ${cluster.name}`, smallRoom(w - 12))),
  ]);
}

/**
 * @param {GraphModel} model
 * @param {import("../graph/visible.js").Item} item
 * @param {Rect} rect
 */
function itemElement(model, item, [cx, cy, w, h]) {
  const x = round(cx - w / 2);
  const y = round(cy - h / 2);
  if (item.type === "cluster") {
    const cluster = model.clusters[item.index];
    return s(
      "g",
      { class: "hw-gnode hw-gblock", "data-key": item.key, "data-node-type": "cluster", "data-path": cluster.path, "data-expanded": "false" },
      [
        s("rect", { class: "hw-gnode-shape", x, y, width: round(w), height: round(h), rx: 5 }),
        s("text", { class: "hw-glabel", x: round(cx), y: round(cy - 3), "text-anchor": "middle" }, [], ellipsize(itemLabel(model, item), labelRoom(w))),
        s("text", { class: "hw-gdetail", x: round(cx), y: round(cy + 10), "text-anchor": "middle" }, [], ellipsize(blockDetail(model, item), smallRoom(w - 8))),
      ],
    );
  }
  const node = model.nodes[item.index];
  /** @type {Record<string, string>} */
  const attrs = { class: "hw-gnode", "data-key": item.key, "data-node-type": node.type, "data-id": node.id };
  if (node.op) attrs["data-op"] = node.op;
  if (model.view === "dataflow") attrs["data-path"] = node.id;
  return s("g", attrs, [
    s("rect", { class: "hw-gnode-shape", x, y, width: round(w), height: round(h), rx: node.type === "op" ? 3 : 11 }),
    s("text", { class: "hw-glabel", x: round(cx), y: round(cy + 4), "text-anchor": "middle" }, [], ellipsize(node.label, labelRoom(w))),
  ]);
}

/**
 * Path data of a small arrowhead at the end of a route, pointing along its last segment.
 * @param {number[][]} points
 */
function arrowHead(points) {
  if (points.length < 2) return "";
  const [x1, y1] = points[points.length - 2];
  const [x2, y2] = points[points.length - 1];
  const length = Math.hypot(x2 - x1, y2 - y1) || 1;
  const ux = (x2 - x1) / length;
  const uy = (y2 - y1) / length;
  const bx = x2 - ux * 7;
  const by = y2 - uy * 7;
  return `M${round(x2)},${round(y2)} L${round(bx - uy * 3.5)},${round(by + ux * 3.5)} L${round(bx + uy * 3.5)},${round(by - ux * 3.5)} Z`;
}

/**
 * Draw `visible` at `layout` into `layer`, yielding every `chunk` items; fills `drawn` with key -> {el, rect}.
 * @param {SVGGElement} layer
 * @param {GraphModel} model
 * @param {import("../graph/visible.js").Visible} visible
 * @param {import("../graph/layout.js").Layout} layout
 * @param {Drawn} drawn
 * @returns {Generator<void, void, void>}
 */
export function* drawSteps(layer, model, visible, layout, drawn, chunk = 40) {
  // A generator, so the caller spreads a large drawing over frames: the browser styles and lays
  // out SVG text slowly (~0.2 ms a node on a loaded machine).
  const boxes = s("g", { class: "hw-gboxes" });
  const edges = s("g", { class: "hw-gedges" });
  const nodes = s("g", { class: "hw-gnodes" });
  layer.replaceChildren(boxes, edges, nodes);
  let count = 0;
  for (const box of visible.boxes) {
    const rect = layout.positions[box.key];
    if (!rect) continue;
    const el = boxElement(model, box, rect);
    boxes.append(el);
    drawn.set(box.key, { el, rect });
    if (++count % chunk === 0) yield;
  }
  for (const item of visible.items) {
    const rect = layout.positions[item.key];
    if (!rect) continue;
    const el = itemElement(model, item, rect);
    nodes.append(el);
    drawn.set(item.key, { el, rect });
    if (++count % chunk === 0) yield;
  }
  // Every arrowhead in one path: SVG markers on hundreds of edges cost more to paint than the edges.
  /** @type {string[]} */
  const heads = [];
  const routes = new Map(layout.edges.map((e) => [`${e.src} ${e.dst}`, e.points]));
  for (const edge of visible.edges) {
    const points = routes.get(`${edge.src} ${edge.dst}`) ?? [];
    const tip = edge.count > 1 ? `${edge.count} edges` : edge.title;
    const attrs = { class: "hw-gedge", d: edgePath(points), "data-src": edge.src, "data-dst": edge.dst };
    edges.append(s("path", { ...attrs, "data-count": edge.count }, [tip ? s("title", {}, [], tip) : null]));
    heads.push(arrowHead(points));
    if (++count % (chunk * 2) === 0) yield;
  }
  edges.append(s("path", { class: "hw-garrows", d: heads.join(" ") }));
}

/**
 * Replace the hook badges of every drawn element: kinds attached to its id or path, and hooks hidden inside blocks;
 * `hookKinds` (the `hook_kinds` traitlet) gives their badge texts.
 * @param {Drawn} drawn
 * @param {GraphModel} model
 * @param {Map<string, string[]>} hooksByPath
 * @param {import("../kinds.js").KindTable} hookKinds
 */
export function drawBadges(drawn, model, hooksByPath, hookKinds) {
  for (const { el, rect } of drawn.values()) {
    el.querySelector(":scope > .hw-gbadges")?.remove();
    const place = el.getAttribute("data-id") ?? el.getAttribute("data-path");
    const kinds = place === null ? [] : (hooksByPath.get(place) ?? []);
    const inside = el.getAttribute("data-node-type") === "cluster" ? hooksInside(model, el.getAttribute("data-path"), hooksByPath) : 0;
    if (!kinds.length && !inside) continue;
    const [cx, cy, w, h] = rect;
    let x = cx + w / 2 - 2;
    const y = el.classList.contains("hw-gbox") ? cy - h / 2 + 1 : cy - h / 2 - 8;
    const group = s("g", { class: "hw-gbadges" });
    // [data-kind, label, tooltip]: a hook kind's badge, then the count of hooks inside a collapsed block
    /** @type {[string | null, string, string][]} */
    const badges = kinds.map((kind) => [kind, badgeLabel(hookKinds, kind), kind]);
    if (inside) badges.push([null, `+${inside}`, `${inside} hook${inside === 1 ? "" : "s"} inside`]);
    for (const [kind, label, tip] of badges.reverse()) {
      const width = label.length * SMALL_CHAR_WIDTH + 6;
      x -= width;
      const attrs = kind === null ? { class: "hw-gbadge hw-gbadge-inside" } : { class: "hw-gbadge", "data-kind": kind };
      group.append(
        s("g", attrs, [
          s("title", {}, [], tip),
          s("rect", { x: round(x), y: round(y), width: round(width), height: 13, rx: 3 }),
          s("text", { x: round(x + width / 2), y: round(y + 10), "text-anchor": "middle" }, [], label),
        ]),
      );
      x -= 2;
    }
    el.append(group);
  }
}

/**
 * How many hooks sit inside the module at `path` (on its submodules or their nodes), itself aside.
 * @param {GraphModel} model
 * @param {string | null} path
 * @param {Map<string, string[]>} hooksByPath
 */
function hooksInside(model, path, hooksByPath) {
  if (path === null) return 0;
  const prefix = path === "" ? "" : `${path}.`;
  let count = 0;
  for (const [place, kinds] of hooksByPath) {
    if (place === path) continue;
    const node = model.byId.get(place); // a node id: its module's path; else a path itself
    /** @type {string} */
    const scope = node !== undefined ? model.clusters[model.nodes[node].cluster].path : place;
    if (scope === path || scope.startsWith(prefix)) count += kinds.length;
  }
  return count;
}
