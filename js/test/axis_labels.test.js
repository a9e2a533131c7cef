import assert from "node:assert/strict";
import { test } from "node:test";
import { fitLeft, integerColumns, rowLabel, thinIndices } from "../src/axis_labels.js";

test("thinIndices labels every cell that has room, else every 2nd, 5th, 10th…", () => {
  assert.deepEqual(thinIndices(5, 500, 40), [0, 1, 2, 3, 4]);
  assert.deepEqual(thinIndices(48, 288, 13), [0, 5, 10, 15, 20, 25, 30, 35, 40, 45]); // 6 px rows, 13 px apart
  assert.deepEqual(thinIndices(10, 100, 15), [0, 2, 4, 6, 8]);
  assert.deepEqual(thinIndices(300, 300, 25).slice(0, 3), [0, 50, 100]);
  assert.deepEqual(thinIndices(0, 100, 10), []);
  assert.deepEqual(thinIndices(3, 0, 10), []);
});

test("fitLeft keeps a path's tail behind an ellipsis, within the width", () => {
  const measure = (/** @type {string} */ s) => s.length * 10;
  assert.equal(fitLeft("lm_head", 100, measure), "lm_head");
  assert.equal(fitLeft("transformer.h.3.mlp.c_fc", 100, measure), "….mlp.c_fc");
  assert.ok(measure(fitLeft("transformer.h.3.mlp.c_fc", 100, measure)) <= 100);
  assert.equal(fitLeft("abc", 10, measure), "…");
  assert.equal(fitLeft("abc", 5, measure), "");
});

test("rowLabel names layers by path and other rows by what they are", () => {
  assert.equal(rowLabel("layer", "transformer.h.0"), "transformer.h.0");
  assert.equal(rowLabel("layer", ""), "(model)");
  assert.equal(rowLabel("rank", "1"), "rank 1");
});

test("integerColumns: steps are, layers are not", () => {
  assert.ok(integerColumns(["1", "2", "10"]));
  assert.ok(!integerColumns(["", "transformer.wte"]));
  assert.ok(!integerColumns([]));
});
