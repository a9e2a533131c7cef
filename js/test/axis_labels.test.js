import assert from "node:assert/strict";
import { test } from "node:test";
import { fitLeft, integerColumns, rowLabel, stepTicks, thinIndices, withRow } from "../src/axis_labels.js";

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

test("stepTicks marks round steps, all of them when they have room", () => {
  const range = (/** @type {number} */ a, /** @type {number} */ b) => Array.from({ length: b - a + 1 }, (_, k) => a + k);
  assert.deepEqual(stepTicks([1, 2, 3, 4, 5], 500, 36), [0, 1, 2, 3, 4]);
  const hundred = range(1, 100); // 5 px a column: a tick every 10 steps
  assert.deepEqual(stepTicks(hundred, 500, 36).map((j) => hundred[j]), [10, 20, 30, 40, 50, 60, 70, 80, 90, 100]);
  const sparse = range(0, 49).map((k) => 10 * k); // logged every 10 steps, 10 px a column
  assert.deepEqual(stepTicks(sparse, 500, 36).map((j) => sparse[j]).slice(0, 3), [0, 50, 100]);
  assert.deepEqual(stepTicks([], 500, 36), []);
});

test("withRow labels the selected row, dropping its close neighbours", () => {
  assert.deepEqual(withRow([0, 5, 10], 6, 4, 13), [0, 6, 10]);
  assert.deepEqual(withRow([0, 5, 10], 6, 3, 13), [0, 6]);
  assert.deepEqual(withRow([0, 5, 10], 5, 3, 13), [0, 5, 10]);
  assert.deepEqual(withRow([0, 5, 10], null, 3, 13), [0, 5, 10]);
});
