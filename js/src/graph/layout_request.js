/** What the layout is asked for: each visible item sized from its text, boxes and edges by key; pure, no DOM, no dagre. */

// Width of one character of the graph's monospace font (0.6 em, a little more for fallback fonts) at its
// two sizes: labels are 11 px, block details and box names 10 px. Text is not measured, to stay DOM-free.
export const CHAR_WIDTH = 6.7;
export const SMALL_CHAR_WIDTH = 6.1;
export const MAX_NODE_WIDTH = 260;
const NODE_HEIGHT = 24;
const BLOCK_HEIGHT = 34;
const PAD = 16;
export const BOX_LABEL = 14; // room above a box's contents for its name

/** @typedef {import("./model.js").GraphModel} GraphModel */
/** @typedef {import("./visible.js").Item} Item */
/**
 * What a layout is asked for: sized items and the boxes around them by key (`box` null: on the canvas), and edges.
 * @typedef {{nodes: {key: string, width: number, height: number, box: string | null}[],
 *   boxes: {key: string, box: string | null}[], edges: {src: string, dst: string}[]}} LayoutRequest
 */

/**
 * Text drawn for an item: a node's label, or a collapsed cluster's name after its ▸ marker.
 * @param {GraphModel} model
 * @param {Item} item
 */
export function itemLabel(model, item) {
  if (item.type === "node") return model.nodes[item.index].label;
  return `▸ ${model.clusters[item.index].name}`;
}

/**
 * How many characters of 11 px label fit in an item `width` px wide (its padding aside).
 * @param {number} width
 */
export function labelRoom(width) {
  return Math.max(1, Math.floor((width - PAD / 2) / CHAR_WIDTH));
}

/**
 * How many characters of 10 px text fit in `width` px.
 * @param {number} width
 */
export function smallRoom(width) {
  return Math.max(1, Math.floor(width / SMALL_CHAR_WIDTH));
}

/**
 * Second line of a collapsed cluster: how many nodes it holds.
 * @param {GraphModel} model
 * @param {Item} item
 */
export function blockDetail(model, item) {
  const total = model.clusters[item.index].total;
  return `${total.toLocaleString("en-US")} node${total === 1 ? "" : "s"}`;
}

/**
 * The layout request for `visible`: plain data, so it can be posted to a worker.
 * @param {GraphModel} model
 * @param {import("./visible.js").Visible} visible
 * @returns {LayoutRequest}
 */
export function layoutRequest(model, visible) {
  const nodes = visible.items.map((item) => {
    const text = itemLabel(model, item);
    const width = Math.min(MAX_NODE_WIDTH, Math.max(56, text.length * CHAR_WIDTH + PAD));
    if (item.type === "node") return { key: item.key, width, height: NODE_HEIGHT, box: item.box };
    const detail = blockDetail(model, item);
    const wide = Math.min(MAX_NODE_WIDTH, Math.max(width, detail.length * SMALL_CHAR_WIDTH + PAD));
    return { key: item.key, width: wide, height: BLOCK_HEIGHT, box: item.box };
  });
  const boxes = visible.boxes.map((b) => ({ key: b.key, box: b.box }));
  const edges = visible.edges.map((e) => ({ src: e.src, dst: e.dst }));
  return { nodes, boxes, edges };
}
