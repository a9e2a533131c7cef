/** What the graph panel shows of a GraphModel: collapse/expand, the depth that fits, aggregated edges; pure, no DOM. */

import { nodeScope } from "./text.js";

/** @typedef {import("./model.js").GraphModel} GraphModel */
/** @typedef {import("./model.js").GraphPlace} GraphPlace */
/** Open clusters, by index. @typedef {Set<number>} Expanded */
/**
 * A drawn item: a node, or a collapsed cluster's block; `box` is the key of the box around it.
 * @typedef {{key: string, type: "node" | "cluster", index: number, box: string | null}} Item
 */
/** An open cluster drawn as a box. @typedef {{key: string, index: number, box: string | null}} Box */
/**
 * Edges between two drawn keys, merged.
 * @typedef {{src: string, dst: string, count: number, title: string}} VisibleEdge
 */
/** @typedef {{items: Item[], boxes: Box[], edges: VisibleEdge[]}} Visible */

/*
 * Keys name what is drawn: "n<index>" a node, "c<index>" a cluster (a box when open, one block when
 * collapsed). A cluster is open when it is the root, was expanded, holds a single node (a box around
 * one node says nothing), or only wraps one child cluster (a model kept in `self.model`).
 */

/**
 * Whether cluster `c` shows its contents under the expanded set.
 * @param {GraphModel} model
 * @param {Expanded} expanded
 * @param {number} c
 */
export function isOpen(model, expanded, c) {
  const cluster = model.clusters[c];
  if (c === model.root || cluster.total <= 1 || expanded.has(c)) return true;
  if (cluster.nodes.length > 0) return false;
  let filled = 0;
  for (const k of cluster.children) if (model.clusters[k].total > 0 && ++filled > 1) return false;
  return filled === 1;
}

/**
 * For each cluster, the outermost collapsed cluster that hides it (itself when collapsed), or -1 when shown open.
 * @param {GraphModel} model
 * @param {Expanded} expanded
 */
export function hiddenBy(model, expanded) {
  const rep = new Int32Array(model.clusters.length).fill(-1);
  for (const c of model.order) {
    const parent = model.clusters[c].parent;
    if (parent >= 0 && rep[parent] >= 0) rep[c] = rep[parent];
    else rep[c] = isOpen(model, expanded, c) ? -1 : c;
  }
  return rep;
}

/**
 * For each cluster, the open cluster drawn as a box around its contents (itself when it is one), or -1.
 * @param {GraphModel} model
 * @param {Int32Array} rep
 */
function enclosingBoxes(model, rep) {
  const box = new Int32Array(model.clusters.length).fill(-1);
  for (const c of model.order) {
    const cluster = model.clusters[c];
    const drawn = c !== model.root && rep[c] < 0 && cluster.total > 1;
    box[c] = drawn ? c : cluster.parent >= 0 ? box[cluster.parent] : -1;
  }
  return box;
}

/**
 * The visible graph: items [{key, type, index, box}], boxes (open clusters) [{key, index, box}], merged edges [{src, dst, count, title}].
 * @param {GraphModel} model
 * @param {Expanded} expanded
 * @returns {Visible}
 */
export function visibleGraph(model, expanded) {
  const rep = hiddenBy(model, expanded);
  const box = enclosingBoxes(model, rep);
  const boxKey = (/** @type {number} */ c) => (c >= 0 && box[c] >= 0 ? `c${box[c]}` : null);
  /** @type {Item[]} */
  const items = [];
  /** @type {Box[]} */
  const boxes = [];
  for (const c of model.order) {
    const cluster = model.clusters[c];
    if (cluster.total === 0) continue;
    if (rep[c] === c) items.push({ key: `c${c}`, type: "cluster", index: c, box: boxKey(cluster.parent) });
    if (rep[c] >= 0) continue;
    if (box[c] === c) boxes.push({ key: `c${c}`, index: c, box: boxKey(cluster.parent) });
    for (const n of cluster.nodes) items.push({ key: `n${n}`, type: "node", index: n, box: boxKey(c) });
  }
  const keyOf = (/** @type {number} */ n) => {
    const c = rep[model.nodes[n].cluster];
    return c >= 0 ? `c${c}` : `n${n}`;
  };
  /** @type {Map<string, VisibleEdge>} */
  const merged = new Map();
  for (const [src, dst, title] of model.edges) {
    const a = keyOf(src);
    const b = keyOf(dst);
    if (a === b) continue; // inside one collapsed cluster
    const pair = `${a} ${b}`;
    const edge = merged.get(pair);
    if (edge) edge.count += 1;
    else merged.set(pair, { src: a, dst: b, count: 1, title });
  }
  return { items, boxes, edges: [...merged.values()] };
}

/**
 * How many items are drawn when every cluster shallower than `depth` is expanded.
 * @param {GraphModel} model
 * @param {number} depth
 */
function itemsAtDepth(model, depth) {
  const expanded = new Set(model.order.filter((c) => model.clusters[c].depth < depth));
  const rep = hiddenBy(model, expanded);
  let count = 0;
  for (const c of model.order) {
    if (model.clusters[c].total === 0) continue;
    if (rep[c] === c) count += 1;
    else if (rep[c] < 0) count += model.clusters[c].nodes.length;
  }
  return count;
}

/**
 * The expanded set that opens clusters to the deepest level whose drawing keeps at most `budget` items.
 * @param {GraphModel} model
 * @param {number} budget
 */
export function depthThatFits(model, budget) {
  const deepest = Math.max(0, ...model.order.map((c) => model.clusters[c].depth));
  let best = 1;
  for (let depth = 2; depth <= deepest + 1; depth++) {
    if (itemsAtDepth(model, depth) > budget) break;
    best = depth;
  }
  return new Set(model.order.filter((c) => model.clusters[c].depth < best));
}

/**
 * `expanded` plus every ancestor of cluster `c`, so that `c` itself is drawn (as a block or a box).
 * @param {GraphModel} model
 * @param {Expanded} expanded
 * @param {number} c
 */
export function revealCluster(model, expanded, c) {
  const next = new Set(expanded);
  for (let k = model.clusters[c].parent; k >= 0; k = model.clusters[k].parent) next.add(k);
  return next;
}

/**
 * `expanded` plus cluster `c` and every cluster below it.
 * @param {GraphModel} model
 * @param {Expanded} expanded
 * @param {number} c
 */
export function expandSubtree(model, expanded, c) {
  const next = new Set(expanded);
  const stack = [c];
  while (stack.length) {
    const k = /** @type {number} */ (stack.pop());
    next.add(k);
    stack.push(...model.clusters[k].children);
  }
  return next;
}

/**
 * `expanded` without cluster `c` and the clusters below it (re-expanding opens one level again).
 * @param {GraphModel} model
 * @param {Expanded} expanded
 * @param {number} c
 */
export function collapseSubtree(model, expanded, c) {
  const next = new Set(expanded);
  const stack = [c];
  while (stack.length) {
    const k = /** @type {number} */ (stack.pop());
    next.delete(k);
    stack.push(...model.clusters[k].children);
  }
  return next;
}

/**
 * What `selected` (a node id or module path) points at in `model`: {node, cluster} indices, -1 when not.
 * @param {GraphModel} model
 * @param {unknown} selected
 * @returns {GraphPlace}
 */
export function resolveSelection(model, selected) {
  const none = { node: -1, cluster: -1 };
  if (typeof selected !== "string") return none;
  if (model.view === "autograd" && model.byId.has(selected)) {
    const node = /** @type {number} */ (model.byId.get(selected));
    return { node, cluster: model.nodes[node].cluster };
  }
  const path = model.view === "dataflow" && !model.byPath.has(selected) ? nodeScope(selected) : selected;
  const c = path === null ? undefined : model.byPath.get(path);
  if (c === undefined || model.clusters[c].total === 0) return none;
  const cluster = model.clusters[c];
  if (cluster.total === 1) {
    const only = cluster.nodes.length ? cluster.nodes[0] : soleNode(model, c);
    return { node: only, cluster: model.nodes[only].cluster };
  }
  return { node: -1, cluster: c };
}

/**
 * The first node in cluster `c`'s subtree, which holds one.
 * @param {GraphModel} model
 * @param {number} c
 * @returns {number}
 */
export function soleNode(model, c) {
  for (let k = c; ; ) {
    const cluster = model.clusters[k];
    if (cluster.nodes.length) return cluster.nodes[0];
    k = /** @type {number} */ (cluster.children.find((child) => model.clusters[child].total > 0));
  }
}

/**
 * The key drawn for a resolved selection under `expanded` (a collapsed ancestor's when hidden), or null.
 * @param {GraphModel} model
 * @param {Expanded} expanded
 * @param {GraphPlace} selection
 */
export function selectionKey(model, expanded, selection) {
  const rep = hiddenBy(model, expanded);
  if (selection.node >= 0) {
    const c = rep[model.nodes[selection.node].cluster];
    return c >= 0 ? `c${c}` : `n${selection.node}`;
  }
  if (selection.cluster >= 0) {
    const c = rep[selection.cluster];
    return c >= 0 ? `c${c}` : `c${selection.cluster}`;
  }
  return null;
}

/**
 * `expanded` opened far enough that the selection is drawn as itself, not inside a collapsed block.
 * @param {GraphModel} model
 * @param {Expanded} expanded
 * @param {GraphPlace} selection
 */
export function revealSelection(model, expanded, selection) {
  if (selection.node >= 0) {
    const c = model.nodes[selection.node].cluster;
    return revealCluster(model, expanded, c).add(c);
  }
  return selection.cluster >= 0 ? revealCluster(model, expanded, selection.cluster) : expanded;
}
