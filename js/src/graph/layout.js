/** Layout of a visible graph with dagre: node sizes from labels, boxes laid out inside out, edge routes; pure, no DOM. */

import dagre from "@dagrejs/dagre";

// Width of one character of the graph's monospace font (0.6 em, a little more for fallback fonts) at its
// two sizes: labels are 11 px, block details and box names 10 px. Text is not measured, to stay DOM-free.
export const CHAR_WIDTH = 6.7;
export const SMALL_CHAR_WIDTH = 6.1;
export const MAX_NODE_WIDTH = 260;
const NODE_HEIGHT = 24;
const BLOCK_HEIGHT = 34;
const PAD = 16;
export const BOX_LABEL = 14; // room above a box's contents for its name

/** Text drawn for an item: a node's label, or a collapsed cluster's name after its ▸ marker. */
export function itemLabel(model, item) {
  if (item.type === "node") return model.nodes[item.index].label;
  return `▸ ${model.clusters[item.index].name}`;
}

/** How many characters of 11 px label fit in an item `width` px wide (its padding aside). */
export function labelRoom(width) {
  return Math.max(1, Math.floor((width - PAD / 2) / CHAR_WIDTH));
}

/** How many characters of 10 px text fit in `width` px. */
export function smallRoom(width) {
  return Math.max(1, Math.floor(width / SMALL_CHAR_WIDTH));
}

/** Second line of a collapsed cluster: how many nodes it holds. */
export function blockDetail(model, item) {
  const total = model.clusters[item.index].total;
  return `${total.toLocaleString("en-US")} node${total === 1 ? "" : "s"}`;
}

/** The layout request for `visible`: plain data, so it can be posted to a worker. */
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

const PAD_X = 10; // inside a box, around its contents
const PAD_Y = 8;
const MARGIN = 8; // around the whole drawing

/** Lay out one container's direct members (items and child boxes, already sized) with flat dagre. */
function layoutMembers(members, sizes, pairs) {
  const graph = new dagre.graphlib.Graph({ multigraph: false });
  graph.setGraph({ rankdir: "TB", nodesep: 14, ranksep: 26, edgesep: 8, marginx: 0, marginy: 0 });
  graph.setDefaultEdgeLabel(() => ({}));
  for (const key of members) graph.setNode(key, { ...sizes.get(key) });
  for (const [src, dst] of pairs.values()) graph.setEdge(src, dst);
  dagre.layout(graph);
  const at = new Map(members.map((key) => [key, graph.node(key)]));
  const routes = new Map();
  for (const [pair, [src, dst]] of pairs) routes.set(pair, (graph.edge(src, dst)?.points ?? []).map((q) => [q.x, q.y]));
  return { at, routes, width: graph.graph().width ?? 0, height: graph.graph().height ?? 0 };
}

/** Lay `request` out top to bottom: {positions: {key: [cx, cy, w, h]}, edges: [{src, dst, points}], x, y, width, height}. */
export function computeLayout(request) {
  // Each box is laid out on its own, innermost first, then placed as one sized block in its parent:
  // dagre's compound mode took 10× longer (12 s for 500 nodes in 150 boxes). An edge is routed in the
  // innermost box holding both ends, between the members holding them, and drawn from the real items.
  const members = new Map([["", []], ...request.boxes.map((box) => [box.key, []])]);
  const parentOf = new Map(); // "" is the canvas; a box that is not in the request counts as the canvas
  for (const item of [...request.boxes, ...request.nodes]) parentOf.set(item.key, members.has(item.box) ? item.box : "");
  for (const [key, parent] of parentOf) members.get(parent).push(key);
  const chain = (key) => {
    const keys = [key];
    for (let k = key; k !== ""; ) keys.push((k = parentOf.get(k) ?? ""));
    return keys;
  };
  // Each edge belongs to the innermost container holding both ends, between the members holding them.
  const pairs = new Map([...members.keys()].map((key) => [key, new Map()]));
  const placed = request.edges.map((edge) => {
    const up = chain(edge.src);
    const down = chain(edge.dst);
    const shared = new Set(down.slice(1));
    const level = up.findIndex((key, i) => i > 0 && shared.has(key));
    const container = up[level];
    const from = up[level - 1];
    const to = down[down.indexOf(container) - 1];
    const pair = `${from} ${to}`;
    pairs.get(container).set(pair, [from, to]);
    return { edge, container, pair, from, to };
  });
  const sizes = new Map(request.nodes.map((node) => [node.key, { width: node.width, height: node.height }]));
  const depth = (key) => chain(key).length;
  const inner = new Map();
  for (const box of [...request.boxes].sort((a, b) => depth(b.key) - depth(a.key))) {
    const result = layoutMembers(members.get(box.key), sizes, pairs.get(box.key));
    inner.set(box.key, result);
    sizes.set(box.key, { width: result.width + 2 * PAD_X, height: result.height + BOX_LABEL + 2 * PAD_Y });
  }
  inner.set("", layoutMembers(members.get(""), sizes, pairs.get("")));
  // Top-down: each container's members from its content origin.
  const positions = {};
  const origin = new Map([["", [MARGIN, MARGIN]]]);
  const queue = [""];
  while (queue.length) {
    const container = queue.shift();
    const [ox, oy] = origin.get(container);
    for (const [key, n] of inner.get(container).at) {
      const rect = [ox + n.x, oy + n.y, n.width, n.height];
      positions[key] = rect;
      if (inner.has(key)) {
        origin.set(key, [rect[0] - rect[2] / 2 + PAD_X, rect[1] - rect[3] / 2 + BOX_LABEL + PAD_Y]);
        queue.push(key);
      }
    }
  }
  const edges = placed.map(({ edge, container, pair, from, to }) => {
    const [ox, oy] = origin.get(container);
    const route = inner.get(container).routes.get(pair).map(([x, y]) => [ox + x, oy + y]);
    const [sx, sy, , sh] = positions[edge.src];
    const [dx, dy, , dh] = positions[edge.dst];
    // Ends inside a box start and stop at the item itself, not at the box's border.
    if (from !== edge.src || route.length < 2) route[0] = [sx, sy + sh / 2];
    if (to !== edge.dst || route.length < 2) route[Math.max(route.length - 1, 1)] = [dx, dy - dh / 2];
    return { src: edge.src, dst: edge.dst, points: route };
  });
  const root = inner.get("");
  return { positions, edges, x: 0, y: 0, width: root.width + 2 * MARGIN, height: root.height + 2 * MARGIN };
}

/** The layout as typed arrays to transfer from the worker: rects (4 per node, then box), edge points, offsets. */
export function packLayout(request, layout) {
  const keys = [...request.nodes, ...request.boxes].map((item) => item.key);
  const rects = new Float64Array(keys.length * 4);
  keys.forEach((key, i) => rects.set(layout.positions[key] ?? [NaN, NaN, 0, 0], i * 4));
  const offsets = new Uint32Array(layout.edges.length + 1);
  layout.edges.forEach((edge, i) => {
    offsets[i + 1] = offsets[i] + edge.points.length * 2;
  });
  const points = new Float64Array(offsets[layout.edges.length]);
  layout.edges.forEach((edge, i) => points.set(edge.points.flat(), offsets[i]));
  const { x, y, width, height } = layout;
  return { rects, points, offsets, x, y, width, height };
}

/** computeLayout's result back from packLayout's arrays and the request they were made for. */
export function unpackLayout(request, packed) {
  const positions = {};
  [...request.nodes, ...request.boxes].forEach((item, i) => {
    const rect = Array.from(packed.rects.subarray(i * 4, i * 4 + 4));
    if (!Number.isNaN(rect[0])) positions[item.key] = rect;
  });
  const edges = request.edges.map((edge, i) => {
    const flat = packed.points.subarray(packed.offsets[i], packed.offsets[i + 1]);
    const points = [];
    for (let k = 0; k < flat.length; k += 2) points.push([flat[k], flat[k + 1]]);
    return { src: edge.src, dst: edge.dst, points };
  });
  const { x, y, width, height } = packed;
  return { positions, edges, x, y, width, height };
}
