/** Which container (box, slice or the canvas) each item and edge of a layout request is laid out in; pure, no dagre. */

import { SLICE_LIMIT, sliceMembers } from "./layout_slices.js";

/** The keys from `key` up to the canvas "": itself, its box, that box's box, …, "". */
function chainOf(parentOf, key) {
  const keys = [key];
  for (let k = key; k !== ""; ) keys.push((k = parentOf.get(k) ?? ""));
  return keys;
}

/**
 * Each edge in the innermost container holding both ends, between the members holding them:
 * [{edge, container, pair, from, to}], `pair` naming the member-to-member route it is drawn along.
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

/** Cut `container`'s members into slices (and slices of slices) until it holds at most `limit`. */
function cutIntoSlices(container, tree, links, limit) {
  const { members, parentOf, slices } = tree;
  let keys = members.get(container);
  while (keys.length > limit) {
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
    links = links.map(([from, to]) => [sliceOf.get(from), sliceOf.get(to)]).filter(([from, to]) => from !== to);
  }
  members.set(container, keys);
}

/**
 * The containers of `request`: members (container key -> member keys, "" the canvas; a box that is not in the request
 * counts as the canvas), parentOf, slices (keys of the containers added to cut one of more than `limit` members), each
 * edge's place (see placeEdges) and depth(key), how many containers hold `key`.
 */
export function layoutTree(request, limit = SLICE_LIMIT) {
  const members = new Map([["", []], ...request.boxes.map((box) => [box.key, []])]);
  const parentOf = new Map();
  for (const item of [...request.boxes, ...request.nodes]) parentOf.set(item.key, members.has(item.box) ? item.box : "");
  for (const [key, parent] of parentOf) members.get(parent).push(key);
  const tree = { members, parentOf, slices: new Set() };
  let placed = placeEdges(request.edges, parentOf);
  const big = new Map([...members].filter(([, keys]) => keys.length > limit).map(([key]) => [key, []]));
  for (const { container, from, to } of placed) big.get(container)?.push([from, to]);
  for (const [container, links] of big) cutIntoSlices(container, tree, links, limit);
  if (big.size > 0) placed = placeEdges(request.edges, parentOf);
  return { ...tree, placed, depth: (key) => chainOf(parentOf, key).length };
}
