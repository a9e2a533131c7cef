/** The `graph` traitlet turned into one shape for both views (nodes, forward edges, module clusters); pure, no DOM. */

import { displayName, displayPath } from "../format.js";
import { savedTitle } from "./text.js";

/*
 * GraphModel: {view, nodes: [{id, label, type, op, cluster, title}], edges: [[src, dst, title]],
 * clusters: [{path, name, parent, depth, children, nodes, total}], order (parents before children),
 * root, byId: Map<id, node index>, byPath: Map<module path, cluster index>}. Edges run forward.
 */

/**
 * A node: an autograd op, parameter or leaf, or a dataflow module or end; `cluster` is its module's index.
 * @typedef {{id: string, label: string, type: "op" | "param" | "leaf" | "module" | "end", op: string | null,
 *   cluster: number, title: string}} GraphNode
 */
/** An edge [src, dst, title], node indices, drawn forward. @typedef {[number, number, string]} GraphEdge */
/**
 * A module: its parent's, children's and nodes' indices, its depth, and `total` nodes in its subtree.
 * @typedef {{path: string, name: string, parent: number, depth: number, children: number[], nodes: number[],
 *   total: number}} Cluster
 */
/**
 * @typedef {{view: "autograd" | "dataflow", nodes: GraphNode[], edges: GraphEdge[], clusters: Cluster[],
 *   order: number[], root: number, byId: Map<string, number>, byPath: Map<string, number>}} GraphModel
 */
/**
 * What a selection or a search match points at: node and cluster indices, -1 for none.
 * @typedef {{node: number, cluster: number}} GraphPlace
 */

/**
 * Last segment of a module path ("layer1.0.conv1" -> "conv1") as shown (`displayName`); the root reads "(model)".
 * @param {string} path
 */
export function shortName(path) {
  if (path === "") return "(model)";
  const dot = path.lastIndexOf(".");
  return displayName(dot < 0 ? path : path.slice(dot + 1));
}

/**
 * @param {string} path
 * @param {number} parent
 * @returns {Cluster}
 */
function newCluster(path, parent) {
  return { path, name: shortName(path), parent, depth: 0, children: [], nodes: [], total: 0 };
}

/**
 * The model from node records and module clusters (paths + parent indices). Each node's `cluster`
 * is corrected to the root when it points nowhere, so every node lies in exactly one cluster.
 * @param {GraphModel["view"]} view
 * @param {GraphNode[]} nodes
 * @param {GraphEdge[]} edges
 * @param {string[]} paths
 * @param {number[]} parents
 * @returns {GraphModel}
 */
function assemble(view, nodes, edges, paths, parents) {
  const clusters = paths.map((path, index) => newCluster(path, parents[index] ?? -1));
  let root = clusters.findIndex((cluster) => cluster.path === "");
  if (root < 0) {
    root = clusters.length;
    clusters.push(newCluster("", -1));
  }
  for (const [index, cluster] of clusters.entries()) {
    if (index === root) cluster.parent = -1;
    else if (!(cluster.parent >= 0 && cluster.parent < clusters.length) || cluster.parent === index) cluster.parent = root;
    if (cluster.parent >= 0) clusters[cluster.parent].children.push(index);
  }
  nodes.forEach((node, index) => {
    if (!(node.cluster >= 0 && node.cluster < clusters.length)) node.cluster = root;
    clusters[node.cluster].nodes.push(index);
  });
  // Breadth-first from the root: parents come before children, which depth and totals rely on.
  const order = [root];
  for (let i = 0; i < order.length; i++) {
    for (const child of clusters[order[i]].children) {
      clusters[child].depth = clusters[order[i]].depth + 1;
      order.push(child);
    }
  }
  for (let i = order.length - 1; i >= 0; i--) {
    const cluster = clusters[order[i]];
    cluster.total += cluster.nodes.length;
    if (cluster.parent >= 0) clusters[cluster.parent].total += cluster.total;
  }
  const byId = new Map(nodes.map((node, index) => [node.id, index]));
  const byPath = new Map(clusters.map((cluster, index) => [cluster.path, index]));
  return { view, nodes, edges, clusters, order, root, byId, byPath };
}

/**
 * GraphModel of the compact autograd payload: op nodes, AccumulateGrad labelled by its parameter.
 * @param {Partial<import("../payloads.js").CompactGraph>} payload
 */
export function autogradModel(payload) {
  const ids = payload.ids ?? [];
  // `params` rows are [node index, parameter name], `saved` rows [node index, …] (savedTitle reads the rest).
  const params = new Map(
    (payload.params ?? []).map(([index, name]) => /** @type {[number, string]} */ ([index, name])),
  );
  const saved = new Map((payload.saved ?? []).map((entry) => [entry[0], entry]));
  const modules = payload.modules ?? [];
  /** @type {GraphNode[]} */
  const nodes = ids.map((id, index) => {
    const op = payload.ops?.[/** @type {number} */ (payload.op?.[index])] ?? "?"; // no op known: "?"
    const param = params.get(index) ?? null;
    const cluster = payload.module?.[index] ?? -1;
    const module = modules[cluster] ?? "";
    const accumulate = op === "AccumulateGrad";
    const lines = [displayName(id), param ? `${op} of ${displayName(param)}` : op, `module: ${displayPath(module)}`];
    const entry = saved.get(index);
    if (entry) lines.push(...savedTitle(entry));
    return {
      id,
      label: accumulate ? (param === null ? "input leaf" : displayName(param)) : op,
      type: accumulate ? (param ? "param" : "leaf") : "op",
      op,
      cluster,
      title: lines.join("\n"),
    };
  });
  // Payload edges follow the gradient (consumer -> producer); they are drawn forward, producer -> consumer.
  const edges = (payload.edges ?? [])
    .filter(([src, dst]) => nodes[src] && nodes[dst])
    .map(([src, dst]) => /** @type {GraphEdge} */ ([dst, src, ""]));
  return assemble("autograd", nodes, edges, modules, payload.parents ?? []);
}

const ENDS = new Set(["<input>", "<output>"]);

/**
 * GraphModel of a dataflow graph: one node per module (the ops of its own forward), inside its ancestors' clusters.
 * @param {Partial<import("../payloads.js").Dataflow>} payload
 */
export function dataflowModel(payload) {
  const paths = [""];
  const parents = [-1];
  const index = new Map([["", 0]]);
  /** @type {(path: string) => number} */
  const clusterOf = (path) => {
    if (!index.has(path)) {
      const dot = path.lastIndexOf(".");
      const parent = clusterOf(dot < 0 ? "" : path.slice(0, dot));
      index.set(path, paths.length);
      paths.push(path);
      parents.push(parent);
    }
    return /** @type {number} */ (index.get(path));
  };
  const flowNodes = payload.nodes ?? [];
  const cluster = flowNodes.map(({ module }) => (ENDS.has(module) ? 0 : clusterOf(String(module))));
  const hasChildren = new Set(parents);
  /** @type {GraphNode[]} */
  const nodes = flowNodes.map(({ module, ops }, k) => {
    const end = ENDS.has(module);
    const own = !end && hasChildren.has(cluster[k]);
    const name = displayPath(module);
    return {
      id: module,
      label: end ? module : own ? `${shortName(module)} (own ops)` : shortName(module),
      type: end ? "end" : "module",
      op: null,
      cluster: cluster[k],
      title: end ? module : `${name}\n${ops} autograd op${ops === 1 ? "" : "s"} of its own forward`,
    };
  });
  const position = new Map(flowNodes.map(({ module }, k) => [module, k]));
  /** @type {GraphEdge[]} */
  const edges = [];
  for (const edge of payload.edges ?? []) {
    const src = position.get(edge.src);
    const dst = position.get(edge.dst);
    if (src === undefined || dst === undefined) continue;
    const shapes = (edge.shapes ?? []).filter(Array.isArray).map((shape) => shape.join("×") || "scalar");
    const tensors = `${edge.tensors} tensor${edge.tensors === 1 ? "" : "s"}`;
    const route = `${displayName(edge.src)} → ${displayName(edge.dst)}`;
    edges.push([src, dst, `${route}: ${tensors}${shapes.length ? ` (${shapes.join(", ")})` : ""}`]);
  }
  return assemble("dataflow", nodes, edges, paths, parents);
}
