import assert from "node:assert/strict";
import { test } from "node:test";
import { flagText, formatRatio, sortRatioRows } from "../src/training.js";

const rows = [
  { param: "conv.weight", optimizer: "SGD", ratio: 1e-3, flag: "" },
  { param: "conv.bias", optimizer: "Adam", ratio: 0.5, flag: "high" },
  { param: "fc.weight", optimizer: "SGD", ratio: "nan", flag: "undefined" },
  { param: "fc.bias", optimizer: "Adam", ratio: 1e-7, flag: "low" },
];
const names = (sorted) => sorted.map((r) => r.param);

test("sortRatioRows keeps the model's order for parameters, reversed when descending", () => {
  assert.deepEqual(names(sortRatioRows(rows, "param")), ["conv.weight", "conv.bias", "fc.weight", "fc.bias"]);
  assert.deepEqual(names(sortRatioRows(rows, "param", true)), ["fc.bias", "fc.weight", "conv.bias", "conv.weight"]);
});

test("sortRatioRows sorts ratios numerically with NaN first when descending", () => {
  assert.deepEqual(names(sortRatioRows(rows, "ratio", true)), ["fc.weight", "conv.bias", "conv.weight", "fc.bias"]);
  assert.deepEqual(names(sortRatioRows(rows, "ratio")), ["fc.bias", "conv.weight", "conv.bias", "fc.weight"]);
});

test("sortRatioRows puts flagged rows first and sorts optimizers by name, ties in model order", () => {
  assert.deepEqual(names(sortRatioRows(rows, "flag", true)), ["conv.bias", "fc.bias", "fc.weight", "conv.weight"]);
  assert.deepEqual(names(sortRatioRows(rows, "optimizer")), ["conv.bias", "fc.bias", "conv.weight", "fc.weight"]);
  assert.notEqual(sortRatioRows(rows, "param"), rows); // a new array: the model's rows are left alone
});

test("formatRatio and flagText read well", () => {
  assert.equal(formatRatio(1.234e-3), "1.23e-3");
  assert.equal(formatRatio(0.1234), "0.123");
  assert.equal(formatRatio(0), "0");
  assert.equal(formatRatio("nan"), "nan");
  assert.equal(formatRatio(null), "—");
  assert.equal(flagText("high"), "▲ above 1e-1");
  assert.equal(flagText("low"), "▼ below 1e-5");
  assert.equal(flagText(""), "ok");
  assert.equal(flagText("nonfinite"), "✖ NaN/Inf in the update or the weight");
  assert.equal(flagText("undefined"), "no ratio: ‖w‖ = 0");
});

test("sortRatioRows puts a non-finite update or weight above every other flag", () => {
  const diverged = [...rows, { param: "head.weight", optimizer: "SGD", ratio: "nan", flag: "nonfinite" }];
  assert.deepEqual(names(sortRatioRows(diverged, "flag", true)).slice(0, 2), ["head.weight", "conv.bias"]);
});
