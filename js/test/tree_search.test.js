import assert from "node:assert/strict";
import { test } from "node:test";
import {
  expandablePaths,
  flattenVisible,
  highlightParts,
  scrollToReveal,
  searchTree,
  visibleWindow,
} from "../src/tree.js";
import { sampleTree } from "./fixtures.js";

/** A root with `n` Linear children: the shape of a 10,000-module model. */
function wideTree(n) {
  const children = Array.from({ length: n }, (_, i) => ({
    path: `layers.${i}`,
    name: String(i),
    cls: "Linear",
    children: [],
  }));
  return { path: "", name: "Wide", cls: "Wide", children };
}

test("expandablePaths lists every node with children", () => {
  assert.deepEqual([...expandablePaths(sampleTree())].sort(), ["", "features", "features.block"]);
});

test("searchTree matches path, name and class case-insensitively, in tree order", () => {
  const tree = sampleTree();
  assert.deepEqual(searchTree(tree, "conv"), ["features.0", "features.block.0"]);
  assert.deepEqual(searchTree(tree, "BLOCK"), ["features.block", "features.block.0"]);
  assert.deepEqual(searchTree(tree, "linear"), ["head"]);
  assert.deepEqual(searchTree(tree, "  "), []);
  assert.deepEqual(searchTree(tree, "zzz"), []);
  assert.deepEqual(searchTree(tree, "e", 2).length, 2);
});

test("highlightParts splits around every occurrence and keeps the original case", () => {
  assert.deepEqual(highlightParts("ConvConv2d", "conv"), [
    { text: "Conv", match: true },
    { text: "Conv", match: true },
    { text: "2d", match: false },
  ]);
  assert.deepEqual(highlightParts("head", "x"), [{ text: "head", match: false }]);
  assert.deepEqual(highlightParts("<img src=x>", ""), [{ text: "<img src=x>", match: false }]);
});

test("visibleWindow draws the rows in view plus overscan, clamped to the ends", () => {
  assert.deepEqual(visibleWindow(0, 440, 22, 10_000, 10), { start: 0, end: 31 });
  assert.deepEqual(visibleWindow(22 * 5000, 440, 22, 10_000, 10), { start: 4990, end: 5031 });
  assert.deepEqual(visibleWindow(22 * 20_000, 440, 22, 10_000, 10), { start: 9989, end: 10_000 });
  assert.deepEqual(visibleWindow(0, 440, 22, 0), { start: 0, end: 0 });
});

test("scrollToReveal moves only when the row is out of view", () => {
  assert.equal(scrollToReveal(3, 0, 440, 22), null);
  assert.equal(scrollToReveal(100, 0, 440, 22), 101 * 22 - 440);
  assert.equal(scrollToReveal(2, 500, 440, 22), 44);
});

test("a 10,000-module tree flattens and searches quickly", () => {
  const tree = wideTree(10_000);
  const start = performance.now();
  const rows = flattenVisible(tree, new Set([""]));
  const hits = searchTree(tree, "layers.99");
  const elapsed = performance.now() - start;
  assert.equal(rows.length, 10_001);
  assert.equal(hits.length, 111); // layers.99, layers.990–999, layers.9900–9999
  assert.ok(elapsed < 200, `took ${elapsed} ms`);
});
