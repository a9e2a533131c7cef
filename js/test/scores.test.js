import assert from "node:assert/strict";
import { test } from "node:test";
import {
  formatScore,
  isSigned,
  luminance,
  parseRgb,
  formatProbability,
  probabilityColors,
  scoreColors,
  scoreScale,
  textOn,
} from "../src/scores.js";

function contrast(a, b) {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x);
  return (hi + 0.05) / (lo + 0.05);
}
const rgb = (text) => parseRgb(text);
const hex = (text) => [1, 3, 5].map((i) => parseInt(text.slice(i, i + 2), 16));

test("scores are coloured against the largest finite magnitude, red up and blue down", () => {
  assert.equal(scoreScale([0.5, -2, "nan", Infinity]), 2);
  assert.equal(scoreScale([]), 0);
  assert.equal(isSigned([0.1, -0.2]), true);
  assert.equal(isSigned([0.1, 0.2, "nan"]), false);
  const strong = scoreColors(2, 2);
  const weak = scoreColors(0.2, 2);
  const negative = scoreColors(-2, 2);
  assert.deepEqual(rgb(strong.background), [178, 24, 43]);
  assert.deepEqual(rgb(negative.background), [33, 102, 172]);
  assert.equal(strong.strength, 1);
  assert.ok(Math.abs(weak.strength - 0.1) < 1e-12);
  assert.deepEqual(rgb(scoreColors(0, 0).background), [255, 255, 255]); // all zero: every token neutral
  assert.deepEqual(scoreColors("nan", 2), { background: null, color: null, strength: null });
});

test("the text on every score colour reads at 4.5:1 or more, on light and dark pages", () => {
  for (const base of [[255, 255, 255], [17, 17, 17], [40, 44, 52]]) {
    for (let i = -20; i <= 20; i += 1) {
      const { background, color } = scoreColors(i / 20, 1, base);
      assert.ok(contrast(rgb(background), hex(color)) >= 4.5, `${background} with ${color} on ${base}`);
    }
    for (let p = 0; p <= 20; p += 1) {
      for (const floor of [0, 1e-4]) {
        const { background, color } = probabilityColors(p / 20, base, floor);
        assert.ok(contrast(rgb(background), hex(color)) >= 4.5, `${background} with ${color} on ${base}`);
      }
    }
  }
  assert.equal(textOn([0, 0, 0]), "#ffffff");
  assert.equal(textOn([255, 255, 255]), "#000000");
});

test("the page's background is read from computed styles, transparent as white", () => {
  assert.deepEqual(parseRgb("rgb(17, 17, 17)"), [17, 17, 17]);
  assert.deepEqual(parseRgb("rgba(0, 0, 0, 0)"), [255, 255, 255]);
  assert.deepEqual(parseRgb(""), [255, 255, 255]);
});

test("scores read as short numbers", () => {
  assert.equal(formatScore(0.012345), "0.0123");
  assert.equal(formatScore(-3.2e-5), "-3.20e-5");
  assert.equal(formatScore(0), "0");
  assert.equal(formatScore("nan"), "nan");
  assert.equal(formatScore(123456), "1.23e+5");
});

test("lens probabilities read at 3 significant digits, the tiny ones as <0.01%, and colour on a log scale", () => {
  assert.equal(formatProbability(0.43121), "43.1%");
  assert.equal(formatProbability(0.000123), "0.0123%");
  assert.equal(formatProbability(1.5e-4), "0.0150%");
  assert.equal(formatProbability(2e-7), "<0.01%");
  assert.equal(formatProbability(0.99999), ">99.9%");
  assert.equal(formatProbability(1), "100%");
  assert.equal(formatProbability(0), "0%");
  const white = /** @type {[number, number, number]} */ ([255, 255, 255]);
  // 1e-4 is the floor (no colour), 1e-2 half way, 1 full; linear without a floor
  assert.deepEqual(rgb(probabilityColors(1e-4, white, 1e-4).background), [255, 255, 255]);
  assert.deepEqual(rgb(probabilityColors(1e-2, white, 1e-4).background), rgb(probabilityColors(0.5, white).background));
  assert.deepEqual(rgb(probabilityColors(1, white, 1e-4).background), rgb(probabilityColors(1, white).background));
});
