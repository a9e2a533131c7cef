/** Layout of a visible graph with dagre: boxes laid out inside out, one short dagre call at a time, then placed; no DOM. */

import dagre from "@dagrejs/dagre";
import { BOX_LABEL } from "./layout_request.js";
import { layoutTree } from "./layout_tree.js";

const PAD_X = 10; // inside a box, around its contents
const PAD_Y = 8;
const MARGIN = 8; // around the whole drawing
// Room around a container's contents: a box's frame and name; a slice is drawn as nothing, so it has none.
const BOX_INSET = { left: PAD_X, top: BOX_LABEL + PAD_Y, bottom: PAD_Y };
const SLICE_INSET = { left: 0, top: 0, bottom: 0 };

/** @typedef {import("./layout_request.js").LayoutRequest} LayoutRequest */
/** A rectangle by its centre and size: [cx, cy, width, height]. @typedef {number[]} Rect */
/**
 * An edge's route through `points` ([x, y] each).
 * @typedef {{src: string, dst: string, points: number[][]}} RoutedEdge
 */
/**
 * A laid-out graph: each key's rectangle, each edge's route, and the drawing's bounds.
 * @typedef {{positions: Record<string, Rect>, edges: RoutedEdge[], x: number, y: number, width: number,
 *   height: number}} Layout
 */
/** How far a layout got, after each step. @typedef {{done: number, total: number}} Progress */
/** @typedef {{width: number, height: number}} Size */
/**
 * A container's members placed by dagre: centres and sizes, routes by pair, its size.
 * @typedef {{at: Map<string, {x: number, y: number, width: number, height: number}>,
 *   routes: Map<string, number[][]>, width: number, height: number}} Inner
 */
/** @typedef {{left: number, top: number, bottom: number}} Inset */

/**
 * Lay out one container's direct members (items and child containers, already sized) with flat dagre.
 * @param {string[]} members
 * @param {Map<string, Size>} sizes
 * @param {Map<string, [string, string]>} pairs
 * @returns {Inner}
 */
function layoutMembers(members, sizes, pairs) {
  const graph = new dagre.graphlib.Graph({ multigraph: false });
  graph.setGraph({ rankdir: "TB", nodesep: 14, ranksep: 26, edgesep: 8, marginx: 0, marginy: 0 });
  graph.setDefaultEdgeLabel(() => ({}));
  for (const key of members) graph.setNode(key, { ...sizes.get(key) });
  for (const [src, dst] of pairs.values()) graph.setEdge(src, dst);
  dagre.layout(graph);
  const at = new Map(members.map((key) => [key, graph.node(key)]));
  const routes = new Map();
  for (const [pair, [src, dst]] of pairs) {
    /** @type {import("@dagrejs/dagre").Point[]} */
    const points = graph.edge(src, dst)?.points ?? [];
    routes.set(pair, points.map((q) => [q.x, q.y]));
  }
  return { at, routes, width: graph.graph().width ?? 0, height: graph.graph().height ?? 0 };
}

/**
 * Lay `request` out top to bottom, one container per step, yielding {done, total} after each; returns
 * {positions: {key: [cx, cy, w, h]}, edges: [{src, dst, points}], x, y, width, height}.
 * @param {LayoutRequest} request
 * @returns {Generator<Progress, Layout, void>}
 */
export function* layoutSteps(request) {
  // Each box is laid out on its own, innermost first, then placed as one sized block in its parent:
  // dagre's compound mode took 10× longer (12 s for 500 nodes in 150 boxes). A container of many
  // members is cut into slices, laid out the same way, so that no step is one long dagre call.
  const { members, slices, placed, depth } = layoutTree(request);
  /** @type {Map<string, Map<string, [string, string]>>} */
  const pairs = new Map([...members.keys()].map((key) => [key, new Map()]));
  // Every container has its members and its pairs: what layoutTree returned names no other.
  const membersOf = (/** @type {string} */ key) => /** @type {string[]} */ (members.get(key));
  const pairsOf = (/** @type {string} */ key) => /** @type {Map<string, [string, string]>} */ (pairs.get(key));
  for (const { container, pair, from, to } of placed) pairsOf(container).set(pair, [from, to]);
  /** @type {Map<string, Size>} */
  const sizes = new Map(request.nodes.map((node) => [node.key, { width: node.width, height: node.height }]));
  const inset = (/** @type {string} */ key) => (slices.has(key) ? SLICE_INSET : BOX_INSET);
  const order = [...members.keys()].filter((key) => key !== "").sort((a, b) => depth(b) - depth(a));
  const total = order.length + 1;
  yield { done: 0, total }; // the first dagre call in a task of its own: dagre's first runs are its slowest
  /** @type {Map<string, Inner>} */
  const inner = new Map();
  for (const key of order) {
    const result = layoutMembers(membersOf(key), sizes, pairsOf(key));
    inner.set(key, result);
    const { left, top, bottom } = inset(key);
    sizes.set(key, { width: result.width + 2 * left, height: result.height + top + bottom });
    yield { done: inner.size, total };
  }
  inner.set("", layoutMembers(membersOf(""), sizes, pairsOf("")));
  yield { done: total, total };
  return place({ inner, placed, slices, inset });
}

/**
 * The containers' layouts put together: each member placed from its container's content origin, top down.
 * @param {{inner: Map<string, Inner>, placed: import("./layout_tree.js").PlacedEdge[], slices: Set<string>,
 *   inset: (key: string) => Inset}} containers
 * @returns {Layout}
 */
function place({ inner, placed, slices, inset }) {
  /** @type {Record<string, Rect>} */
  const positions = {};
  /** @type {Map<string, number[]>} */
  const origin = new Map([["", [MARGIN, MARGIN]]]);
  const queue = [""];
  // Every container in `queue` has its origin and its layout in `inner`, set before it was queued.
  while (queue.length) {
    const container = /** @type {string} */ (queue.shift());
    const [ox, oy] = /** @type {number[]} */ (origin.get(container));
    for (const [key, n] of /** @type {Inner} */ (inner.get(container)).at) {
      const rect = [ox + n.x, oy + n.y, n.width, n.height];
      if (!slices.has(key)) positions[key] = rect;
      if (inner.has(key)) {
        const { left, top } = inset(key);
        origin.set(key, [rect[0] - rect[2] / 2 + left, rect[1] - rect[3] / 2 + top]);
        queue.push(key);
      }
    }
  }
  const edges = placed.map(({ edge, container, pair, from, to }) => {
    const [ox, oy] = /** @type {number[]} */ (origin.get(container));
    const routes = /** @type {Inner} */ (inner.get(container)).routes;
    let route = /** @type {number[][]} */ (routes.get(pair)).map(([x, y]) => [ox + x, oy + y]);
    // Between neighbouring slices, the bend dagre puts between the slices' centres would make every edge
    // crossing the cut meet at one point: draw them straight from item to item instead.
    if (slices.has(from) && route.length <= 3) route = [route[0], /** @type {number[]} */ (route.at(-1))];
    const [sx, sy, , sh] = positions[edge.src];
    const [dx, dy, , dh] = positions[edge.dst];
    // Ends inside a box or slice start and stop at the item itself, not at the container's border.
    if (from !== edge.src || route.length < 2) route[0] = [sx, sy + sh / 2];
    if (to !== edge.dst || route.length < 2) route[Math.max(route.length - 1, 1)] = [dx, dy - dh / 2];
    return { src: edge.src, dst: edge.dst, points: route };
  });
  const root = /** @type {Inner} */ (inner.get(""));
  return { positions, edges, x: 0, y: 0, width: root.width + 2 * MARGIN, height: root.height + 2 * MARGIN };
}

/**
 * The whole layout in one go (what the worker runs): layoutSteps run to the end.
 * @param {LayoutRequest} request
 */
export function computeLayout(request) {
  const steps = layoutSteps(request);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}
