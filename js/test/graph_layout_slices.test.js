import assert from "node:assert/strict";
import { test } from "node:test";

import { memberRanks, sliceMembers } from "../src/graph/layout_slices.js";

test("ranks: the longest path from the top, a member no link enters right above what it links to", () => {
  // a -> b -> c -> d, and p -> d (a parameter read by d): p sits at d's rank - 1, not at the top with a.
  const ranks = memberRanks(["a", "b", "c", "d", "p"], [["a", "b"], ["b", "c"], ["c", "d"], ["p", "d"], ["a", "c"]]);
  assert.deepEqual([...ranks], [0, 1, 2, 3, 2]);
});

test("ranks: a cycle is broken at its first member, and every member gets a rank", () => {
  const ranks = memberRanks(["x", "y", "z"], [["x", "y"], ["y", "z"], ["z", "x"]]);
  assert.deepEqual([...ranks], [0, 1, 2]);
  assert.deepEqual([...memberRanks(["solo"], [])], [0]);
});

test("slices: at most `limit` members each, cut between ranks, every member once, in rank order", () => {
  const members = Array.from({ length: 30 }, (_, i) => `m${i}`);
  const links = members.slice(1).map((key, i) => [members[i], key]); // a chain: one member per rank
  const groups = sliceMembers(members, links, 8);
  assert.deepEqual(groups.map((g) => g.length), [8, 8, 8, 6]);
  assert.deepEqual(groups.flat(), members);
  // two members per rank: a slice never splits a rank that fits
  const pairs = Array.from({ length: 10 }, (_, i) => [`a${i}`, `b${i}`]);
  const wide = sliceMembers(pairs.flat(), pairs.slice(1).flatMap(([a, b], i) => [[pairs[i][0], a], [pairs[i][1], b]]), 5);
  assert.ok(wide.every((g) => g.length === 4), wide.map((g) => g.length).join(" "));
});

test("slices: a rank wider than the limit is cut across", () => {
  const hub = ["top", ...Array.from({ length: 11 }, (_, i) => `leaf${i}`)];
  const groups = sliceMembers(hub, hub.slice(1).map((leaf) => ["top", leaf]), 4);
  assert.deepEqual(groups.map((g) => g.length), [1, 4, 4, 3]);
});
