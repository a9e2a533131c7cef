import assert from "node:assert/strict";
import { test } from "node:test";

import { autogradModel, dataflowModel } from "../src/graph/model.js";
import {
  collapseSubtree,
  depthThatFits,
  expandSubtree,
  hiddenBy,
  resolveSelection,
  revealSelection,
  selectionKey,
  visibleGraph,
} from "../src/graph/visible.js";
import { cnnDataflow, nestedPayload } from "./graph_fixtures.js";

const keysOf = (visible) => visible.items.map((item) => item.key);
const pathKey = (model, path) => `c${model.byPath.get(path)}`;

test("collapsed: one block per top-level module, chained by aggregated edges", () => {
  const model = autogradModel(nestedPayload(3, 4, 5));
  const visible = visibleGraph(model, new Set());
  assert.deepEqual(keysOf(visible), ["0", "1", "2"].map((p) => pathKey(model, p)));
  assert.ok(visible.items.every((item) => item.type === "cluster" && item.box === null));
  assert.deepEqual(visible.boxes, []);
  // 4 blocks × 5 ops per stage; only the chain crosses stages: one edge each, counted once
  assert.deepEqual(
    visible.edges.map((e) => [e.src, e.dst, e.count]),
    [
      [pathKey(model, "0"), pathKey(model, "1"), 1],
      [pathKey(model, "1"), pathKey(model, "2"), 1],
    ],
  );
});

test("expanding a cluster shows its blocks inside its box; parallel edges are merged and counted", () => {
  const model = autogradModel(nestedPayload(2, 3, 2));
  const stage = model.byPath.get("0");
  const visible = visibleGraph(model, new Set([stage]));
  assert.deepEqual(keysOf(visible), [pathKey(model, "1"), ...["0.0", "0.1", "0.2"].map((p) => pathKey(model, p))]);
  assert.deepEqual(visible.boxes, [{ key: `c${stage}`, index: stage, box: null }]);
  assert.ok(visible.items.slice(1).every((item) => item.box === `c${stage}`));
  // inside stage 0, blocks chain 0.0 -> 0.1 -> 0.2, then 0.2 -> stage 1
  assert.deepEqual(
    visible.edges.map((e) => [e.src, e.dst]),
    [
      [pathKey(model, "0.0"), pathKey(model, "0.1")],
      [pathKey(model, "0.1"), pathKey(model, "0.2")],
      [pathKey(model, "0.2"), pathKey(model, "1")],
    ],
  );
  const parallel = autogradModel({
    ids: ["a/X#0", "a/X#1", "b/Y#0"],
    op: [0, 0, 1],
    ops: ["X", "Y"],
    module: [1, 1, 2],
    modules: ["", "a", "b"],
    parents: [-1, 0, 0],
    edges: [
      [2, 0],
      [2, 1],
    ],
  });
  const merged = visibleGraph(parallel, new Set()).edges;
  assert.deepEqual(merged.map((e) => [e.src, e.dst, e.count]), [["c1", "n2", 2]]);
});

test("expand subtree opens every level; collapse closes the levels below too", () => {
  const model = autogradModel(nestedPayload(2, 3, 2));
  const stage = model.byPath.get("0");
  const open = expandSubtree(model, new Set(), stage);
  const visible = visibleGraph(model, open);
  assert.equal(visible.items.filter((item) => item.type === "node").length, 9);
  assert.equal(visible.boxes.length, 4);
  const block = visible.items.find((item) => item.type === "node");
  assert.equal(block.box, pathKey(model, "0.0"));
  assert.equal(visible.boxes.find((b) => b.key === pathKey(model, "0.0")).box, `c${stage}`);
  const closed = collapseSubtree(model, open, stage);
  assert.equal(closed.size, 0);
  assert.deepEqual(keysOf(visibleGraph(model, closed)), [pathKey(model, "0"), pathKey(model, "1")]);
});

test("depth that fits: the deepest level within the budget", () => {
  const model = autogradModel(nestedPayload(4, 5, 3));
  // depth 1: 4 stage blocks; depth 2: 20 block blocks; depth 3: 80 nodes
  assert.equal(visibleGraph(model, depthThatFits(model, 10)).items.length, 4);
  assert.equal(visibleGraph(model, depthThatFits(model, 20)).items.length, 20);
  assert.equal(visibleGraph(model, depthThatFits(model, 80)).items.length, 80);
  assert.equal(visibleGraph(model, depthThatFits(model, 1)).items.length, 4, "never less than the top level");
});

test("a cluster of one node, or wrapping one cluster, is never a block of its own", () => {
  const wrapped = autogradModel({
    ids: ["model.body.a/X#0", "model.body.a/X#1", "model.body.b/Y#0"],
    op: [0, 0, 1],
    ops: ["X", "Y"],
    module: [3, 3, 4],
    modules: ["", "model", "model.body", "model.body.a", "model.body.b"],
    parents: [-1, 0, 1, 2, 2],
    edges: [[2, 1]],
  });
  // "model" only wraps "model.body": it opens by itself, so the first block is "model.body"
  assert.deepEqual(keysOf(visibleGraph(wrapped, new Set())), ["c2"]);
  // "model.body.b" holds one node: shown as that node, inside the boxes of its ancestors
  const open = visibleGraph(wrapped, new Set([2]));
  assert.deepEqual(keysOf(open), ["c3", "n2"]);
  assert.deepEqual(open.boxes.map((b) => [b.key, b.box]), [["c1", null], ["c2", "c1"]]);
  assert.deepEqual(open.items.map((item) => item.box), ["c2", "c2"]);
});

test("selection: a node id reveals its clusters; a module path draws its block or box", () => {
  const model = autogradModel(nestedPayload(2, 3, 2));
  const id = "1.2/MulBackward0#1";
  const target = resolveSelection(model, id);
  assert.equal(model.nodes[target.node].id, id);
  // hidden inside the collapsed stage "1" at first
  assert.equal(selectionKey(model, new Set(), target), pathKey(model, "1"));
  const opened = revealSelection(model, new Set(), target);
  assert.equal(selectionKey(model, opened, target), `n${target.node}`);
  assert.ok(keysOf(visibleGraph(model, opened)).includes(`n${target.node}`));

  const block = resolveSelection(model, "0.1");
  assert.deepEqual(block, { node: -1, cluster: model.byPath.get("0.1") });
  const shown = revealSelection(model, new Set(), block);
  assert.deepEqual([...shown], [model.byPath.get("0"), model.root]);
  assert.equal(selectionKey(model, shown, block), pathKey(model, "0.1"));
  assert.deepEqual(resolveSelection(model, "no.such.module"), { node: -1, cluster: -1 });
  assert.deepEqual(resolveSelection(model, null), { node: -1, cluster: -1 });
});

test("selection in the dataflow view: a leaf module is its node; an autograd node id selects its module", () => {
  const model = dataflowModel(cnnDataflow());
  const conv = resolveSelection(model, "features.conv");
  assert.equal(model.nodes[conv.node].id, "features.conv");
  const viaNode = resolveSelection(model, "features.conv/ConvolutionBackward0#0");
  assert.equal(viaNode.node, conv.node);
  assert.equal(selectionKey(model, new Set(), conv), pathKey(model, "features"));
  assert.equal(selectionKey(model, revealSelection(model, new Set(), conv), conv), `n${conv.node}`);
});

test("5,000 nodes open collapsed at once: model, depth and visible graph in well under a second", () => {
  const payload = nestedPayload(10, 50, 9); // 10 × 50 × (9 ops + 1 parameter) = 5,000 nodes
  const start = performance.now();
  const model = autogradModel(payload);
  const expanded = depthThatFits(model, 120);
  const visible = visibleGraph(model, expanded);
  hiddenBy(model, expanded);
  const elapsed = performance.now() - start;
  assert.equal(model.nodes.length, 5000);
  assert.equal(visible.items.length, 10);
  assert.equal(visible.edges.length, 9);
  assert.ok(elapsed < 500, `took ${elapsed.toFixed(0)} ms`);
  // expanding one stage fully gives the 500-node region the benchmark measures
  const region = visibleGraph(model, expandSubtree(model, expanded, model.byPath.get("3")));
  assert.equal(region.items.filter((item) => item.type === "node").length, 500);
});
