/** Which container (box, slice or the canvas) each item and edge of a layout request is laid out in; pure, no dagre. */

import { SLICE_LIMIT, sliceMembers } from "./layout_slices.js";

/** @typedef {import("./layout_request.js").LayoutRequest} LayoutRequest */
/**
 * An edge in its container, drawn along the route `pair` between members `from` and `to`.
 * @typedef {{edge: {src: string, dst: string}, container: string, pair: string, from: string, to: string}} PlacedEdge
 */
/**
 * The containers: their members, each key's container, the slices added.
 * @typedef {{members: Map<string, string[]>, parentOf: Map<string, string>, slices: Set<string>}} Containers
 */

/**
 * The keys from `key` up to the canvas "": itself, its box, that box's box, …, "".
 * @param {Map<string, string>} parentOf
 * @param {string} key
 */
function chainOf(parentOf, key) {
  const keys = [key];
  for (let k = key; k !== ""; ) keys.push((k = parentOf.get(k) ?? ""));
  return keys;
}

/**
 * Each edge in the innermost container holding both ends, between the members holding them:
 * [{edge, container, pair, from, to}], `pair` naming the member-to-member route it is drawn along.
 * @param {LayoutRequest["edges"]} edges
 * @param {Map<string, string>} parentOf
 * @returns {PlacedEdge[]}
 */
function placeEdges(edges, parentOf) {
  return edges.map((edge) => {
    const up = chainOf(parentOf, edge.src);
    const down = chainOf(parentOf, edge.dst);
    const shared = new Set(down.slice(1));
    const level = up.findIndex((key, i) => i > 0 && shared.has(key));
    const container = up[level];
    const from = up[level - 1];
    const to = down[down.indexOf(container) - 1];
    return { edge, container, pair: `${from} ${to}`, from, to };
  });
}

/**
 * Cut `container`'s members into slices (and slices of slices) until it holds at most `limit`.
 * @param {string} container
 * @param {Containers} tree
 * @param {[string, string][]} links
 * @param {number} limit
 */
function cutIntoSlices(container, tree, links, limit) {
  const { members, parentOf, slices } = tree;
  let keys = /** @type {string[]} */ (members.get(container));
  while (keys.length > limit) {
    /** @type {Map<string, string>} */
    const sliceOf = new Map();
    keys = sliceMembers(keys, links, limit).map((group) => {
      const key = `~${slices.size}`; // request keys are n<i> and c<i>
      slices.add(key);
      members.set(key, group);
      parentOf.set(key, container);
      for (const member of group) {
        parentOf.set(member, key);
        sliceOf.set(member, key);
      }
      return key;
    });
    links = links
      .map(([from, to]) => /** @type {[string, string]} */ ([sliceOf.get(from), sliceOf.get(to)]))
      .filter(([from, to]) => from !== to);
  }
  members.set(container, keys);
}

/**
 * The containers of `request`: members (container key -> member keys, "" the canvas; a box that is not in the request
 * counts as the canvas), parentOf, slices (keys of the containers added to cut one of more than `limit` members), each
 * edge's place (see placeEdges) and depth(key), how many containers hold `key`.
 * @param {LayoutRequest} request
 */
export function layoutTree(request, limit = SLICE_LIMIT) {
  /** @type {Map<string, string[]>} */
  const members = new Map([["", []], ...request.boxes.map((box) => /** @type {[string, string[]]} */ ([box.key, []]))]);
  /** @type {Map<string, string>} */
  const parentOf = new Map();
  for (const item of [...request.boxes, ...request.nodes]) {
    const box = item.box ?? ""; // null: on the canvas
    parentOf.set(item.key, members.has(box) ? box : "");
  }
  for (const [key, parent] of parentOf) /** @type {string[]} */ (members.get(parent)).push(key);
  /** @type {Containers} */
  const tree = { members, parentOf, slices: new Set() };
  let placed = placeEdges(request.edges, parentOf);
  /** @type {Map<string, [string, string][]>} */
  const big = new Map([...members].filter(([, keys]) => keys.length > limit).map(([key]) => [key, []]));
  for (const { container, from, to } of placed) big.get(container)?.push([from, to]);
  for (const [container, links] of big) cutIntoSlices(container, tree, links, limit);
  if (big.size > 0) placed = placeEdges(request.edges, parentOf);
  return { ...tree, placed, depth: (/** @type {string} */ key) => chainOf(parentOf, key).length };
}
