import assert from "node:assert/strict";
import { test } from "node:test";

import { autogradModel, dataflowModel, shortName } from "../src/graph/model.js";
import { formatBytes, nodeScope, savedTitle } from "../src/graph/text.js";
import { cnnDataflow, nestedPayload } from "./graph_fixtures.js";

test("autograd model: clusters nest by module, totals count every node below", () => {
  const model = autogradModel(nestedPayload(2, 3, 2));
  assert.equal(model.nodes.length, 2 * 3 * 3);
  const root = model.clusters[model.root];
  assert.equal(root.path, "");
  assert.equal(root.total, 18);
  const stage = model.clusters[model.byPath.get("1")];
  assert.equal(stage.total, 9);
  assert.deepEqual(stage.children.map((c) => model.clusters[c].path), ["1.0", "1.1", "1.2"]);
  assert.equal(model.clusters[model.byPath.get("1.2")].depth, 2);
  // parents always come before their children in `order`
  const seen = new Set();
  for (const c of model.order) {
    const parent = model.clusters[c].parent;
    assert.ok(parent < 0 || seen.has(parent), `parent of ${model.clusters[c].path} came first`);
    seen.add(c);
  }
});

test("autograd model: AccumulateGrad is labelled by its parameter and edges are drawn forward", () => {
  const model = autogradModel(nestedPayload(1, 1, 2));
  const [param, first, second] = model.nodes;
  assert.equal(param.type, "param");
  assert.equal(param.label, "0.0.weight");
  assert.equal(first.type, "op");
  assert.equal(first.label, "MulBackward0");
  // payload edge [first, param] (gradient flows first -> param) is drawn param -> first
  assert.deepEqual(
    model.edges.map(([a, b]) => [model.nodes[a].id, model.nodes[b].id]),
    [
      ["0.0/AccumulateGrad#weight", "0.0/MulBackward0#0"],
      ["0.0/MulBackward0#0", "0.0/MulBackward0#1"],
    ],
  );
  assert.match(first.title, /saved for backward: 2 tensors, 64 B of its own/);
  assert.match(first.title, /other: 8 float32 32 B = parameter 0\.0\.weight/);
});

test("autograd model: a node pointing at no cluster lands in the root, which is made when missing", () => {
  const model = autogradModel({ ids: ["a/X#0"], op: [0], ops: ["X"], module: [7], modules: ["a"], parents: [-1], edges: [] });
  assert.equal(model.clusters[model.root].path, "");
  assert.equal(model.nodes[0].cluster, model.root);
  assert.equal(model.clusters[model.root].total, 1);
});

test("dataflow model: module nodes inside clusters of their ancestors, edges titled with shapes", () => {
  const model = dataflowModel(cnnDataflow());
  assert.equal(model.view, "dataflow");
  const conv = model.nodes[model.byId.get("features.conv")];
  assert.equal(conv.label, "conv");
  assert.equal(model.clusters[conv.cluster].path, "features.conv");
  assert.equal(model.clusters[model.byPath.get("features")].total, 3);
  assert.equal(model.nodes[model.byId.get("<output>")].cluster, model.root);
  assert.equal(model.edges.length, 6);
  assert.equal(model.edges[0][2], "features.conv → features.bn: 1 tensor (2×4×8×8)");
});

test("dataflow model: a module with own ops and submodules says so", () => {
  const model = dataflowModel({
    nodes: [
      { module: "block", ops: 1 },
      { module: "block.conv", ops: 1 },
    ],
    edges: [{ src: "block.conv", dst: "block", tensors: 1, uses: 1, shapes: [[1]] }],
  });
  assert.equal(model.nodes[0].label, "block (own ops)");
  assert.equal(model.nodes[1].label, "conv");
});

test("text helpers", () => {
  assert.equal(shortName(""), "(model)");
  assert.equal(shortName("layer1.0.conv1"), "conv1");
  assert.equal(formatBytes(512), "512 B");
  assert.equal(formatBytes(1536), "1.5 KB");
  assert.equal(formatBytes(3 * 2 ** 20), "3 MB");
  assert.equal(nodeScope("layer1.0/AddBackward0#0"), "layer1.0");
  assert.equal(nodeScope("layer1.0"), null);
  assert.deepEqual(savedTitle([0, 0, 1, null]), ["saved for backward: 1 tensor, 0 B of its own"]);
});
