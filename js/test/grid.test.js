import assert from "node:assert/strict";
import { test } from "node:test";
import {
  axisLabel,
  FLAG_MISSING,
  FLAG_NONFINITE,
  FLAG_VALUE,
  NONFINITE_RGB,
  cellAt,
  cellColor,
  cellText,
  colorScale,
  columnOfStep,
  decodeGrid,
  stepOfColumn,
  gridHeight,
  nonfiniteText,
  viridis,
} from "../src/grid.js";

/** A grid payload as the kernel sends it: values as little-endian float32, a flag byte a cell. */
function payload(rows, columns, values, flags, extra = {}) {
  const v = new DataView(new ArrayBuffer(values.length * 4));
  values.forEach((x, i) => v.setFloat32(i * 4, x, true));
  const f = new DataView(new ArrayBuffer(flags.length));
  flags.forEach((x, i) => f.setUint8(i, x));
  return { title: "", row_name: "layer", column_name: "step", rows, columns, values: v, flags: f, mark: null, ...extra };
}

test("decodeGrid reads row-major float32 values and flags; buffers too short read as an empty grid", () => {
  const grid = payload(["a", "b"], ["0", "1", "2"], [1, 2, 3, 4, NaN, Infinity], [1, 1, 1, 0, 2, 1]);
  const decoded = decodeGrid(grid);
  assert.equal(decoded.rows, 2);
  assert.equal(decoded.columns, 3);
  assert.deepEqual([...decoded.values.slice(0, 4)], [1, 2, 3, 4]);
  assert.ok(Number.isNaN(decoded.values[4]));
  assert.equal(decoded.values[5], Infinity);
  assert.deepEqual([...decoded.flags], [1, 1, 1, 0, 2, 1]);
  const short = decodeGrid({ ...grid, rows: ["a", "b", "c"] }); // 9 cells announced, 6 sent
  assert.equal(short.rows, 0);
  assert.equal(decodeGrid(null).rows, 0);
  assert.equal(decodeGrid({}).columns, 0);
});

test("colorScale spans recorded finite values, on a log scale when positive over more than a factor of 10", () => {
  const flags = new Uint8Array([FLAG_VALUE, FLAG_VALUE, FLAG_MISSING, FLAG_NONFINITE]);
  assert.deepEqual(colorScale(new Float32Array([0.5, 100, 1e9, NaN]), flags), { low: 0.5, high: 100, log: true });
  assert.deepEqual(colorScale(new Float32Array([-1, 3, 0, 0]), flags), { low: -1, high: 3, log: false });
  assert.deepEqual(colorScale(new Float32Array([2, 3, 0, 0]), flags), { low: 2, high: 3, log: false });
  assert.deepEqual(colorScale(new Float32Array([1]), new Uint8Array([FLAG_MISSING])), { low: null, high: null, log: false });
});

test("cellColor: magenta for NaN/Inf, the theme's grey for no record, viridis from low to high", () => {
  const scale = { low: 1, high: 100, log: true };
  assert.deepEqual(cellColor(5, FLAG_NONFINITE, scale, false), NONFINITE_RGB);
  assert.deepEqual(cellColor(Infinity, FLAG_VALUE, scale, false), NONFINITE_RGB);
  assert.deepEqual(cellColor(5, FLAG_MISSING, scale, false), [217, 217, 217]);
  assert.deepEqual(cellColor(5, FLAG_MISSING, scale, true), [74, 74, 74]);
  assert.deepEqual(cellColor(1, FLAG_VALUE, scale, false), [68, 1, 84]); // viridis' dark end
  assert.deepEqual(cellColor(100, FLAG_VALUE, scale, false), [253, 231, 37]); // its bright end
  assert.deepEqual(cellColor(10, FLAG_VALUE, scale, false), viridis(0.5)); // the middle of a log scale
  assert.deepEqual(cellColor(50.5, FLAG_VALUE, { low: 1, high: 100, log: false }, false), viridis(0.5));
});

test("cellAt maps a point to its cell and nothing outside the box", () => {
  assert.deepEqual(cellAt(0, 0, 100, 50, 5, 10), { row: 0, column: 0 });
  assert.deepEqual(cellAt(99.9, 49.9, 100, 50, 5, 10), { row: 4, column: 9 });
  assert.deepEqual(cellAt(35, 21, 100, 50, 5, 10), { row: 2, column: 3 });
  assert.equal(cellAt(100, 10, 100, 50, 5, 10), null);
  assert.equal(cellAt(-1, 10, 100, 50, 5, 10), null);
  assert.equal(cellAt(10, 10, 100, 50, 0, 10), null);
});

test("cellText names the row and column and reads the value, NaN/Inf and missing cells as such", () => {
  const grid = payload(["enc.0", "enc.1"], ["3", "4–7"], [1.23456, 2, NaN, 5], [FLAG_VALUE, FLAG_MISSING, FLAG_VALUE, FLAG_NONFINITE]);
  const decoded = decodeGrid(grid);
  assert.equal(cellText(decoded, 0, 0, "act_norm"), "layer enc.0 · step 3 · act_norm = 1.235");
  assert.equal(cellText(decoded, 0, 1, "act_norm"), "layer enc.0 · step 4–7 · no record");
  assert.equal(cellText(decoded, 1, 0, "act_norm"), "layer enc.1 · step 3 · act_norm = nan");
  assert.equal(cellText(decoded, 1, 1, "act_norm"), "layer enc.1 · step 4–7 · act_norm = 5 · held NaN/Inf");
  const ranks = decodeGrid(payload(["0", "1"], [""], [1, 2], [1, 1], { row_name: "rank", column_name: "layer" }));
  assert.equal(cellText(ranks, 1, 0, "grad_norm"), "rank 1 · layer (model) · grad_norm = 2");
});

test("cellText escapes what does not print in a module name", () => {
  const decoded = decodeGrid(payload(["a\u202eb"], ["0"], [1], [1]));
  assert.equal(cellText(decoded, 0, 0, "act_norm"), "layer a\\u202eb · step 0 · act_norm = 1");
});

test("columnOfStep and stepOfColumn go between a step and its heatmap column", () => {
  assert.equal(columnOfStep(["3", "4", "6"], 4), 1);
  assert.equal(columnOfStep(["3", "4", "6"], 5), null);
  assert.equal(columnOfStep(["3"], null), null);
  assert.equal(columnOfStep(undefined, 1), null);
  assert.equal(stepOfColumn("12"), 12);
  assert.equal(stepOfColumn("layers.0"), null);
  assert.equal(stepOfColumn(""), null);
  assert.equal(stepOfColumn(undefined), null);
});

test("gridHeight gives few rows room and many rows at least 2 px each", () => {
  assert.equal(gridHeight(0), 0);
  assert.equal(gridHeight(2), 48);
  assert.equal(gridHeight(12), 12 * 14);
  assert.equal(gridHeight(300), 600);
});

test("nonfiniteText states step, rank, module and phase", () => {
  assert.equal(nonfiniteText(null), "");
  assert.equal(
    nonfiniteText({ step: 2, rank: 1, path: "layers.0.mlp", kind: "global_forward", phase: "forward" }),
    "First NaN/Inf: step 2, rank 1, in layers.0.mlp (global_forward, forward)",
  );
});

test("axisLabel shows a layer's path as the tree does, the root as (model), other labels as sent", () => {
  assert.equal(axisLabel("layer", ""), "(model)");
  assert.equal(axisLabel("layer", "enc.0"), "enc.0");
  assert.equal(axisLabel("step", "12"), "12");
  assert.equal(axisLabel("rank", undefined), "");
});

test("cellText reads a run log's counts and fractions as the summary table does", () => {
  const decoded = decodeGrid(payload(["a"], ["1", "2"], [3, 0.25], [FLAG_VALUE, FLAG_VALUE]));
  assert.equal(cellText(decoded, 0, 0, "nonfinite"), "layer a · step 1 · nonfinite = 3");
  assert.equal(cellText(decoded, 0, 1, "zero_fraction"), "layer a · step 2 · zero_fraction = 25.0%");
});
