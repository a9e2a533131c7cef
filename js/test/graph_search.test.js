import assert from "node:assert/strict";
import { test } from "node:test";

import { autogradModel, dataflowModel } from "../src/graph/model.js";
import { matchCount, matchKeys, searchGraph } from "../src/graph/search.js";
import { revealSelection, selectionKey } from "../src/graph/visible.js";
import { cnnDataflow, nestedPayload } from "./graph_fixtures.js";

const ids = (model, matches) => matches.map((m) => (m.node >= 0 ? model.nodes[m.node].id : `module ${model.clusters[m.cluster].path}`));

test("search: modules by path, parameters by name, ops by name, case-insensitive, in drawing order", () => {
  const model = autogradModel(nestedPayload(2, 2, 2));
  assert.deepEqual(ids(model, searchGraph(model, "1.1")), ["module 1.1", "1.1/AccumulateGrad#weight"]);
  assert.deepEqual(ids(model, searchGraph(model, "0.1.WEIGHT")), ["0.1/AccumulateGrad#weight"]);
  assert.equal(searchGraph(model, "mulbackward").length, 8);
  assert.deepEqual(searchGraph(model, "   "), []);
  assert.deepEqual(searchGraph(model, "nothing like it"), []);
});

test("search: an autograd id is searched when the query names one", () => {
  const model = autogradModel(nestedPayload(2, 2, 2));
  assert.deepEqual(ids(model, searchGraph(model, "0.1/MulBackward0#1")), ["0.1/MulBackward0#1"]);
  // without "/" or "#", a path matches its module, not every node inside it
  assert.ok(ids(model, searchGraph(model, "0.1")).every((id) => !id.includes("MulBackward")));
});

test("search: dataflow modules by path; a module of one node gives that node", () => {
  const model = dataflowModel(cnnDataflow());
  const found = searchGraph(model, "head.f");
  assert.deepEqual(ids(model, found), ["head.flatten", "head.fc"]);
  assert.ok(found.every((m) => m.node >= 0));
});

test("a match hidden in a collapsed block is keyed by the block until revealed, then by itself", () => {
  const model = autogradModel(nestedPayload(2, 2, 2));
  const [match] = searchGraph(model, "1.0/MulBackward0#1");
  const collapsed = new Set();
  assert.deepEqual(matchKeys(model, collapsed, [match]), [`c${model.byPath.get("1")}`]);
  const opened = revealSelection(model, collapsed, match);
  assert.deepEqual(matchKeys(model, opened, [match]), [`n${match.node}`]);
  assert.equal(selectionKey(model, opened, match), `n${match.node}`);
});

test("match counter: position, count, none", () => {
  assert.equal(matchCount(0, -1, ""), "");
  assert.equal(matchCount(0, -1, "x"), "no match");
  assert.equal(matchCount(1, -1, "x"), "1 match");
  assert.equal(matchCount(1200, -1, "x"), "1,200 matches");
  assert.equal(matchCount(12, 2, "x"), "3 / 12");
});
