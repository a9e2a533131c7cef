import assert from "node:assert/strict";
import { test } from "node:test";
import { frameChanged, measuredFrame } from "../src/frame.js";
import { lensReadout } from "../src/readout.js";

test("a pane's measure becomes a frame of whole CSS pixels and a sane ratio", () => {
  assert.deepEqual(measuredFrame(530.6, 2), { width: 530, ratio: 2 });
  assert.deepEqual(measuredFrame(-3, Number.NaN), { width: 0, ratio: 1 });
  assert.deepEqual(measuredFrame(400, 0), { width: 400, ratio: 1 });
});

test("the kernel is told a frame only when the width moved 8 px or more, or the ratio changed", () => {
  assert.equal(frameChanged({ width: 0, ratio: 1 }, { width: 530, ratio: 1 }), true); // the first report
  assert.equal(frameChanged({ width: 530, ratio: 1 }, { width: 537, ratio: 1 }), false);
  assert.equal(frameChanged({ width: 530, ratio: 1 }, { width: 522, ratio: 1 }), true);
  assert.equal(frameChanged({ width: 530, ratio: 1 }, { width: 530, ratio: 2 }), true);
  assert.equal(frameChanged({ width: 530, ratio: 1 }, { width: 0, ratio: 2 }), false); // not laid out: nothing
  assert.equal(frameChanged(undefined, { width: 300, ratio: 1 }), true);
});

test("a logit-lens cell's readout names the layer, the position's token, the top token and its probability", () => {
  const text = lensReadout({ layer: 3, layerName: "transformer.h.3", position: 5, token: "cat", top: " the", probability: 0.43121 });
  assert.equal(text, 'layer 3 transformer.h.3 · position 5 "cat" · top " the" 43.1% (log p -0.8412)');
  const answered = { layer: 0, layerName: "", position: 2, token: "", top: "a", probability: 2e-6 };
  assert.equal(
    lensReadout({ ...answered, answer: " the", answerRank: 12, answerProb: 0.000123 }),
    'layer 0 · position 2 · top "a" <0.01% (log p -13.12) · answer " the" rank 12, 0.0123%',
  );
  assert.equal(lensReadout({ ...answered, answer: "a", answerRank: 1, answerProb: 2e-6 }).endsWith('answer "a" rank 1'), true);
});
