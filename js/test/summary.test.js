import assert from "node:assert/strict";
import { test } from "node:test";
import { formatCompact, formatStat, rowObjects, sortRows } from "../src/summary.js";

const rows = [
  { path: "conv1", grad_norm: 0.5, act_nan: 0 },
  { path: "relu1", grad_norm: "nan", act_nan: 3 },
  { path: "conv2", grad_norm: 1e-9, act_nan: 0 },
  { path: "fc" },
];

test("sortRows keeps execution order for the layer column", () => {
  assert.deepEqual(sortRows(rows, "path").map((r) => r.path), ["conv1", "relu1", "conv2", "fc"]);
  assert.deepEqual(sortRows(rows, "path", true).map((r) => r.path), ["fc", "conv2", "relu1", "conv1"]);
});

test("sortRows puts NaN first when descending and missing values last", () => {
  assert.deepEqual(sortRows(rows, "grad_norm", true).map((r) => r.path), ["relu1", "conv1", "conv2", "fc"]);
  assert.deepEqual(sortRows(rows, "grad_norm").map((r) => r.path), ["fc", "conv2", "conv1", "relu1"]);
  assert.deepEqual(sortRows(rows, "act_nan", true).map((r) => r.path), ["relu1", "conv1", "conv2", "fc"]);
});

test("formatStat shows counts, fractions and tiny gradients readably", () => {
  assert.equal(formatStat("act_nan", 3), "3");
  assert.equal(formatStat("grad_zero_fraction", 0.5), "50.0%");
  assert.equal(formatStat("grad_norm", 1e-9), "1.00e-9");
  assert.equal(formatStat("act_norm", 12.34567), "12.35");
  assert.equal(formatStat("grad_norm", "nan"), "nan");
  assert.equal(formatStat("grad_norm", undefined), "—");
});

test("rowObjects turns the wire's value lists into rows, leaving out what a layer did not record", () => {
  const summary = {
    columns: ["path", "act_norm", "grad_norm", "act_nan"],
    rows: [
      ["conv1", 1.5, null, 0],
      ["relu1", "nan", 0.25, 3],
    ],
  };
  assert.deepEqual(rowObjects(summary), [
    { path: "conv1", act_norm: 1.5, act_nan: 0 },
    { path: "relu1", act_norm: "nan", grad_norm: 0.25, act_nan: 3 },
  ]);
  assert.deepEqual(sortRows(rowObjects(summary), "act_norm", true).map((r) => r.path), ["relu1", "conv1"]);
  assert.deepEqual(rowObjects({}), []);
  assert.deepEqual(rowObjects({ columns: ["path"], rows: [] }), []);
});

test("formatCompact fits a statistic in 8 characters", () => {
  const values = [1e-9, -3.8231e-4, 0.11852, -0.11852, 15.90393, 12345.6, -98765432.1, 0];
  const shown = values.map((v) => formatCompact("act_mean", v));
  assert.deepEqual(shown, ["1.00e-9", "-3.82e-4", "0.119", "-0.119", "15.9", "1.23e4", "-9.88e7", "0"]);
  assert.ok(shown.every((text) => text.length <= 8));
  assert.equal(formatCompact("grad_nan", 65536), "65.5k");
  assert.equal(formatCompact("act_zero_fraction", 0.5), "50.0%");
  assert.equal(formatCompact("act_zero_fraction", 1), "100%");
  assert.equal(formatCompact("act_norm", "nan"), "nan");
  assert.equal(formatCompact("act_norm", null), "—");
});
