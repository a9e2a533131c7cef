import assert from "node:assert/strict";
import { test } from "node:test";
import { axisText, decodeHover, float32s, formatValue, highlight, locate, move, readout } from "../src/readout.js";

/** float32 little-endian bytes as ipywidgets hands them: a DataView. @param {number[]} values */
function bytes(values) {
  return new DataView(Float32Array.from(values).buffer);
}

/** @param {Partial<import("../src/payloads.js").HoverAxis>} axis */
function axis(axis) {
  return { name: "row", labels: null, start: 0, stride: 1, count: 0, ...axis };
}

/**
 * A cells region of `rows` × `cols` in `box`, values 0, 1, 2… row-major.
 * @param {number[]} box
 * @param {number} rows
 * @param {number} cols
 * @param {object} [extra]
 * @returns {import("../src/payloads.js").CellsRegion}
 */
function cells(box, rows, cols, extra = {}) {
  return {
    type: "cells",
    box,
    rows,
    cols,
    values: bytes(Array.from({ length: rows * cols }, (_, i) => i + 0.25)),
    row: axis({ name: "query", labels: ["the", "cat", "sat"].slice(0, rows), count: rows }),
    col: axis({ name: "key", count: cols }),
    label: "head 2",
    quantity: "attention",
    aggregate: "",
    ...extra,
  };
}

/** @param {import("../src/payloads.js").Hover["regions"]} regions */
function hover(regions) {
  return { ratio: 2, width: 300, height: 200, pixelated: false, regions };
}

test("float32 bytes decode at any offset, NaN and Inf as themselves", () => {
  const buffer = new Uint8Array(13);
  const view = new DataView(buffer.buffer, 1, 12);
  view.setFloat32(0, 0.5, true);
  view.setFloat32(4, NaN, true);
  view.setFloat32(8, -Infinity, true);
  assert.deepEqual([...float32s(view)], [0.5, NaN, -Infinity]);
  assert.equal(float32s(null).length, 0);
});

test("the cell under a point of a normal box: rows down, columns right", () => {
  const decoded = decodeHover(hover([cells([10, 20, 110, 80], 3, 4)])); // cells 25 × 20 px
  assert.deepEqual(locate(decoded, 10, 20), { region: 0, row: 0, col: 0, index: 0 });
  assert.deepEqual(locate(decoded, 60, 45), { region: 0, row: 1, col: 2, index: 0 });
  assert.deepEqual(locate(decoded, 110, 80), { region: 0, row: 2, col: 3, index: 0 }); // the far edge is the last cell
  assert.equal(locate(decoded, 9, 45), null);
  assert.equal(locate(decoded, 60, 81), null);
  const { text, value } = readout(decoded, { region: 0, row: 1, col: 2, index: 0 });
  assert.equal(value, 6.25);
  assert.equal(text, 'head 2 · query 1 "cat" · key 2 · 6.25');
});

test("the cell under a point of a flipped box: the first row at the bottom", () => {
  const decoded = decodeHover(hover([cells([10, 80, 110, 20], 3, 4)])); // y of row 0's outer edge is 80
  assert.deepEqual(locate(decoded, 12, 78), { region: 0, row: 0, col: 0, index: 0 });
  assert.deepEqual(locate(decoded, 12, 22), { region: 0, row: 2, col: 0, index: 0 });
  const box = highlight(decoded, { region: 0, row: 0, col: 1, index: 0 });
  assert.deepEqual(box, { left: 35, top: 60, width: 25, height: 20 });
  // ArrowUp moves up on screen: to the next row of a flipped axis
  assert.equal(move(decoded, { region: 0, row: 0, col: 1, index: 0 }, "ArrowUp").row, 1);
});

test("several regions: the one under the point answers", () => {
  const decoded = decodeHover(hover([cells([0, 0, 40, 40], 2, 2), cells([50, 0, 90, 40], 2, 2, { label: "head 3" })]));
  assert.deepEqual(locate(decoded, 60, 5), { region: 1, row: 0, col: 0, index: 0 });
  assert.equal(locate(decoded, 45, 5), null);
  assert.match(readout(decoded, { region: 1, row: 0, col: 0, index: 0 }).text, /^head 3 · /);
});

test("an aggregated axis says the indices a cell covers, and the last one stops at the count", () => {
  const features = axis({ name: "feature", stride: 4, count: 10 });
  assert.equal(axisText(features, 2), "features 8–9");
  assert.equal(axisText(features, 1), "features 4–7");
  assert.equal(axisText(axis({ name: "query", stride: 2, count: 8, start: 2 }), 0), "queries 2–3");
  assert.equal(axisText(axis({ name: "position", labels: ["0", "1"] }), 1), "position 1");
  assert.equal(axisText(axis({ name: "token", labels: ["a", "b"], start: 5 }), 1), 'token 6 "b"');
  const decoded = decodeHover(hover([cells([0, 0, 30, 30], 1, 3, { col: features, aggregate: "mean", label: "" })]));
  assert.equal(readout(decoded, { region: 0, row: 0, col: 2, index: 0 }).text, 'query 0 "the" · features 8–9 · mean 2.25');
});

test("a line chart: the nearest step under the mouse, each series' value there", () => {
  /** @type {import("../src/payloads.js").LinesRegion} */
  const lines = {
    type: "lines",
    box: [40, 10, 240, 110],
    x: new DataView(Float64Array.from([0, 5, 10, 20]).buffer),
    x_name: "step",
    x_limits: [0, 20],
    series: [
      { name: "mean", values: bytes([0.5, 0.013, 0.1, 0.2]) },
      { name: "std", values: bytes([1, 0.2, NaN, 0.3]) },
    ],
    label: "",
  };
  const decoded = decodeHover(hover([lines]));
  assert.equal(locate(decoded, 40 + 70, 50)?.index, 1); // x 7 is nearer step 5 than 10
  assert.equal(locate(decoded, 40 + 80, 50)?.index, 2); // x 8
  assert.equal(locate(decoded, 240, 50)?.index, 3);
  assert.equal(locate(decoded, 39, 50), null);
  const shown = readout(decoded, { region: 0, row: 0, col: 0, index: 1 });
  assert.equal(shown.text, "step 5 · mean 0.013 · std 0.2");
  assert.equal(shown.value, Math.fround(0.013));
  assert.equal(readout(decoded, { region: 0, row: 0, col: 0, index: 2 }).text, "step 10 · mean 0.1 · std NaN");
  assert.deepEqual(highlight(decoded, { region: 0, row: 0, col: 0, index: 2 }), { left: 140, top: 10, width: 0, height: 100 });
  assert.equal(move(decoded, { region: 0, row: 0, col: 0, index: 3 }, "ArrowRight").index, 3);
  assert.equal(move(decoded, { region: 0, row: 0, col: 0, index: 3 }, "ArrowLeft").index, 2);
});

test("arrow keys move the readout cell by cell and stop at the edges", () => {
  const decoded = decodeHover(hover([cells([0, 0, 40, 30], 3, 4)]));
  let spot = { region: 0, row: 0, col: 0, index: 0 };
  spot = move(decoded, spot, "ArrowLeft");
  spot = move(decoded, spot, "ArrowUp");
  assert.deepEqual([spot.row, spot.col], [0, 0]);
  for (let i = 0; i < 10; i += 1) spot = move(decoded, spot, "ArrowRight");
  for (let i = 0; i < 10; i += 1) spot = move(decoded, spot, "ArrowDown");
  assert.deepEqual([spot.row, spot.col], [2, 3]);
  assert.deepEqual([move(decoded, spot, "ArrowUp").row, move(decoded, spot, "ArrowLeft").col], [1, 2]);
});

test("values are written with 4 significant digits", () => {
  assert.equal(formatValue(0.43121), "0.4312");
  assert.equal(formatValue(12345.6), "12350");
  assert.equal(formatValue(-1.5e-7), "-1.5e-7");
  assert.equal(formatValue(Infinity), "Inf");
  assert.equal(formatValue(-Infinity), "-Inf");
  assert.equal(formatValue(NaN), "NaN");
});
