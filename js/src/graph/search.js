/** Graph search: the nodes and modules whose name or path holds a query, and the keys that draw them; pure, no DOM. */

import { hiddenBy, soleNode } from "./visible.js";

/** @typedef {import("./model.js").GraphModel} GraphModel */
/** @typedef {import("./model.js").GraphPlace} GraphPlace */

/**
 * Matches of `query` (case-insensitive substring) in `model`, in drawing order, as selections {node, cluster}:
 * modules by path (a module of one node gives that node), nodes by label and op, and by id (a dataflow
 * node's id is its module path; an autograd id "scope/Op#i" is searched when the query holds "/" or "#").
 * @param {GraphModel} model
 * @param {unknown} query
 */
export function searchGraph(model, query) {
  const needle = typeof query === "string" ? query.trim().toLowerCase() : "";
  if (!needle) return [];
  const byId = model.view === "dataflow" || needle.includes("/") || needle.includes("#");
  const has = (/** @type {unknown} */ text) => typeof text === "string" && text.toLowerCase().includes(needle);
  const seen = new Set();
  /** @type {GraphPlace[]} */
  const matches = [];
  /** @type {(node: number, cluster: number) => void} */
  const add = (node, cluster) => {
    const key = node >= 0 ? `n${node}` : `c${cluster}`;
    if (seen.has(key)) return;
    seen.add(key);
    matches.push({ node, cluster: node >= 0 ? model.nodes[node].cluster : cluster });
  };
  for (const c of model.order) {
    const cluster = model.clusters[c];
    if (cluster.total === 0) continue;
    if (c !== model.root && has(cluster.path)) {
      // A module of one node is drawn as that node, never as a box of its own.
      if (cluster.total === 1) add(soleNode(model, c), -1);
      else add(-1, c);
    }
    for (const n of cluster.nodes) {
      const node = model.nodes[n];
      if (has(node.label) || has(node.op) || (byId && has(node.id))) add(n, -1);
    }
  }
  return matches;
}

/**
 * The drawn key of each match under `expanded`: itself, or the collapsed block that hides it.
 * @param {GraphModel} model
 * @param {Set<number>} expanded
 * @param {GraphPlace[]} matches
 */
export function matchKeys(model, expanded, matches) {
  const rep = hiddenBy(model, expanded);
  return matches.map(({ node, cluster }) => {
    const c = node >= 0 ? rep[model.nodes[node].cluster] : rep[cluster];
    if (c >= 0) return `c${c}`;
    return node >= 0 ? `n${node}` : `c${cluster}`;
  });
}

/**
 * What the match counter says: "3 / 12" with a current match, "12 matches", "no match", or "" for no query.
 * @param {number} count
 * @param {number} current
 * @param {string} query
 */
export function matchCount(count, current, query) {
  if (!query) return "";
  if (!count) return "no match";
  if (current >= 0) return `${current + 1} / ${count.toLocaleString("en-US")}`;
  return `${count.toLocaleString("en-US")} match${count === 1 ? "" : "es"}`;
}
