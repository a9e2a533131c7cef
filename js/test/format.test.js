import assert from "node:assert/strict";
import { test } from "node:test";
import {
  displayPath,
  formatCount,
  formatFired,
  formatParams,
  formatPosition,
  formatShape,
  plotPositions,
} from "../src/format.js";

test("formatCount keeps small counts exact", () => {
  assert.equal(formatCount(0), "0");
  assert.equal(formatCount(7), "7");
  assert.equal(formatCount(999), "999");
});

test("formatCount switches units at 1000 and drops a trailing .0", () => {
  assert.equal(formatCount(1000), "1k");
  assert.equal(formatCount(1234), "1.2k");
  assert.equal(formatCount(12345), "12.3k");
  assert.equal(formatCount(123456), "123k");
  assert.equal(formatCount(3_400_000), "3.4M");
  assert.equal(formatCount(25_557_032), "25.6M");
  assert.equal(formatCount(7_000_000_000), "7B");
});

test("formatCount rounding never shows 1000 of a unit", () => {
  assert.equal(formatCount(99_949), "99.9k");
  assert.equal(formatCount(99_960), "100k");
  assert.equal(formatCount(999_499), "999k");
  assert.equal(formatCount(999_500), "1M");
  assert.equal(formatCount(999_999), "1M");
  assert.equal(formatCount(999_999_999), "1B");
});

test("formatCount of a non-number is a dash", () => {
  assert.equal(formatCount(undefined), "—");
  assert.equal(formatCount(Number.NaN), "—");
});

test("formatParams appends frozen parameters only when there are some", () => {
  assert.equal(formatParams(12_345, 0), "12.3k");
  assert.equal(formatParams(12_345, 1000), "12.3k (+1k frozen)");
  assert.equal(formatParams(0, 2320), "0 (+2.3k frozen)");
  assert.equal(formatParams(0, 0), "0");
  assert.equal(formatParams(undefined, undefined), "0");
});

test("formatParams says how many frozen parameters are packed weights of quantized modules", () => {
  assert.equal(formatParams(0, 1552, 1552), "0 (+1.6k frozen, 1.6k packed)");
  assert.equal(formatParams(64, 0, 0), "64");
});

test("formatParams reads a null count (lazy parameters not materialized) as uninitialized, never 0", () => {
  assert.equal(formatParams(null, 0), "uninitialized");
  assert.equal(formatParams(null, 1000), "uninitialized (+1k frozen)");
  assert.equal(formatParams(12_345, null), "12.3k (+uninitialized frozen)");
});

test("formatShape joins dimensions with ×", () => {
  assert.equal(formatShape([1, 16, 32, 32]), "1×16×32×32");
  assert.equal(formatShape([10]), "10");
  assert.equal(formatShape([]), "scalar");
  assert.equal(formatShape(null), "—");
  assert.equal(formatShape(undefined), "—");
  assert.equal(formatShape([[1, 2], [3]]), "(1×2), (3)");
});

test("formatFired and displayPath", () => {
  assert.equal(formatFired(1), "fired 1 time");
  assert.equal(formatFired(3), "fired 3 times");
  assert.equal(formatFired(undefined), "fired 0 times");
  assert.equal(displayPath(""), "(model)");
  assert.equal(displayPath("layer1.0"), "layer1.0");
});

test("formatPosition names the call only when a step holds several", () => {
  assert.equal(formatPosition(3, 0, false), "step 3");
  assert.equal(formatPosition(3, 1, true), "step 3 · call 1");
  assert.equal(formatPosition(3, undefined, true), "step 3");
});

test("plotPositions reads the item's (step, call) pairs and says whether calls matter", () => {
  assert.deepEqual(plotPositions({ positions: [[1, 0], [2, 0]] }), { positions: [[1, 0], [2, 0]], showCall: false });
  assert.deepEqual(plotPositions({ positions: [[1, 0], [1, 1], [2, 0]] }), {
    positions: [[1, 0], [1, 1], [2, 0]],
    showCall: true,
  });
  assert.deepEqual(plotPositions({ positions: [[4, null], "x", [null, 1]] }), { positions: [[4, 0]], showCall: false });
  assert.deepEqual(plotPositions({}), { positions: [], showCall: false });
});
