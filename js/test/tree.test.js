import assert from "node:assert/strict";
import { test } from "node:test";
import {
  ancestorPaths,
  countModules,
  defaultExpanded,
  findNode,
  flattenVisible,
  indexTree,
  isTree,
  nextPath,
  previousPath,
  stepPath,
} from "../src/tree.js";
import { sampleTree } from "./fixtures.js";

const paths = (rows) => rows.map((row) => row.path);

test("countModules counts every node, the root included", () => {
  assert.equal(countModules(sampleTree()), 7);
  assert.equal(countModules({}), 0);
  assert.equal(countModules(null), 0);
});

test("isTree rejects the empty traitlet value", () => {
  assert.equal(isTree({}), false);
  assert.equal(isTree(null), false);
  assert.equal(isTree(sampleTree()), true);
});

test("defaultExpanded opens the root and its children that have children", () => {
  assert.deepEqual([...defaultExpanded(sampleTree())].sort(), ["", "features"]);
  assert.deepEqual([...defaultExpanded(sampleTree(), 1)], [""]);
});

test("flattenVisible respects expansion and records depth", () => {
  const tree = sampleTree();
  assert.deepEqual(paths(flattenVisible(tree, new Set())), [""]);
  assert.deepEqual(paths(flattenVisible(tree, new Set([""]))), ["", "features", "head"]);
  const rows = flattenVisible(tree, defaultExpanded(tree));
  assert.deepEqual(paths(rows), [
    "",
    "features",
    "features.0",
    "features.1",
    "features.block",
    "head",
  ]);
  assert.deepEqual(
    rows.map((row) => row.depth),
    [0, 1, 2, 2, 2, 1],
  );
  const block = rows.find((row) => row.path === "features.block");
  assert.equal(block.hasChildren, true);
  assert.equal(block.expanded, false);
  assert.equal(rows.find((row) => row.path === "head").hasChildren, false);
});

test("flattenVisible hides descendants of a collapsed node even if they are expanded", () => {
  const rows = flattenVisible(sampleTree(), new Set(["", "features.block"]));
  assert.deepEqual(paths(rows), ["", "features", "head"]);
});

test("flattenVisible of no tree is empty", () => {
  assert.deepEqual(flattenVisible({}, new Set([""])), []);
});

test("findNode and indexTree locate nodes and parents", () => {
  const tree = sampleTree();
  assert.equal(findNode(tree, "features.block.0").cls, "Conv2d");
  assert.equal(findNode(tree, "").cls, "Net");
  assert.equal(findNode(tree, "missing"), null);
  const index = indexTree(tree);
  assert.equal(index.size, 7);
  assert.equal(index.get("features.block.0").parent, "features.block");
  assert.equal(index.get("features.block.0").depth, 3);
  assert.equal(index.get("").parent, null);
});

test("ancestorPaths lists ancestors root first", () => {
  const index = indexTree(sampleTree());
  assert.deepEqual(ancestorPaths(index, "features.block.0"), ["", "features", "features.block"]);
  assert.deepEqual(ancestorPaths(index, ""), []);
  assert.deepEqual(ancestorPaths(index, "nope"), []);
});

test("next/previous navigation walks visible rows and clamps at the ends", () => {
  const tree = sampleTree();
  const rows = flattenVisible(tree, defaultExpanded(tree));
  assert.equal(nextPath(rows, ""), "features");
  assert.equal(nextPath(rows, "features.block"), "head");
  assert.equal(nextPath(rows, "head"), "head");
  assert.equal(previousPath(rows, "head"), "features.block");
  assert.equal(previousPath(rows, ""), "");
  assert.equal(stepPath(rows, "features", 3), "features.block");
  assert.equal(stepPath(rows, "features", 99), "head");
});

test("navigation from a hidden path starts at the first row; no rows gives null", () => {
  const tree = sampleTree();
  const rows = flattenVisible(tree, new Set([""]));
  assert.equal(nextPath(rows, "features.block.0"), "");
  assert.equal(nextPath([], ""), null);
});
