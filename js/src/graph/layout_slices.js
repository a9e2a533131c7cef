/**
 * Cutting a container's members into slices that each take one short dagre call: dagre's time grows faster than its
 * node count (24 nodes ~10 ms, 200 nodes ~300 ms, 600 nodes over a second here), and one call cannot be interrupted.
 */

/** Most members a container is laid out with in one dagre call; a bigger one is cut into slices of at most this many. */
export const SLICE_LIMIT = 24;

/**
 * Each member's rank, along `links` ([from, to] pairs, from drawn above to): the longest path to it from the top, except
 * that a member no link enters sits right above the topmost member it links to, as dagre draws a parameter above its
 * op (the longest path alone would put every parameter in the top row). A cycle is broken at its member that comes
 * first in `members`.
 * @param {string[]} members
 * @param {[string, string][]} links
 */
export function memberRanks(members, links) {
  const index = new Map(members.map((key, i) => [key, i]));
  const out = members.map(() => /** @type {number[]} */ ([]));
  const waiting = new Int32Array(members.length); // links into each member from members not yet ranked
  for (const [from, to] of links) {
    const i = index.get(from);
    const j = index.get(to);
    if (i === undefined || j === undefined || i === j) continue;
    out[i].push(j);
    waiting[j] += 1;
  }
  const rank = new Int32Array(members.length);
  const done = new Uint8Array(members.length);
  const sources = waiting.map((n) => (n === 0 ? 1 : 0));
  /** @type {number[]} */
  const ready = [];
  for (let i = 0; i < members.length; i++) if (sources[i]) ready.push(i);
  let first = 0; // members before it are all ranked: where a cycle is looked for
  for (let count = 0; count < members.length; count++) {
    let i = ready.pop();
    if (i === undefined) {
      while (done[first]) first += 1;
      i = first;
    }
    done[i] = 1;
    for (const j of out[i]) {
      if (done[j]) continue;
      rank[j] = Math.max(rank[j], rank[i] + 1);
      if (--waiting[j] === 0) ready.push(j);
    }
  }
  for (let i = 0; i < members.length; i++) {
    if (!sources[i] || out[i].length === 0) continue;
    rank[i] = Math.max(0, out[i].reduce((top, j) => Math.min(top, rank[j]), Infinity) - 1);
  }
  return rank;
}

/**
 * `members` cut into groups of at most `limit`, in rank order, each group whole ranks where a rank fits: cut between
 * ranks, the slices stack top to bottom as the ranks would. A rank wider than `limit` is cut across.
 * @param {string[]} members
 * @param {[string, string][]} links
 * @param {number} limit
 */
export function sliceMembers(members, links, limit) {
  const rank = memberRanks(members, links);
  /** @type {string[][]} */
  const byRank = [];
  members.forEach((key, i) => (byRank[rank[i]] ??= []).push(key));
  /** @type {string[][]} */
  const groups = [];
  /** @type {string[]} */
  let group = [];
  for (const row of byRank) {
    if (!row) continue;
    if (group.length > 0 && group.length + row.length > limit) {
      groups.push(group);
      group = [];
    }
    if (row.length <= limit) {
      group.push(...row);
      continue;
    }
    for (let k = 0; k < row.length; k += limit) groups.push(row.slice(k, k + limit));
  }
  if (group.length > 0) groups.push(group);
  return groups;
}
