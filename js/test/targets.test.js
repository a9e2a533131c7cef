import assert from "node:assert/strict";
import { test } from "node:test";
import { positionField, runChoice, targetOptions } from "../src/targets.js";

const output = (fields) => ({ kind: "classes", tensor: "output", shape: [2, 5], words: "classes", positions: null, decoder: false, loss: false, ...fields });

test("a classifier's picker offers the top class, then each class with its probability", () => {
  const status = { top: [[3, 0.5], [1, 0.25]], output: output({}) };
  assert.deepEqual(targetOptions(status), [
    { value: "top", text: "each item's top class" },
    { value: "3", text: "class 3 (50.0%)" },
    { value: "1", text: "class 1 (25.0%)" },
  ]);
  assert.deepEqual(positionField(status), { shown: false });
});

test("a language model's picker offers next tokens, the loss when there is one, and a position field", () => {
  const status = {
    top: [[17, 0.125]],
    output: output({ kind: "sequence", tensor: "output.logits", shape: [1, 8, 96], words: "tokens", positions: 8, loss: true }),
  };
  assert.deepEqual(targetOptions(status), [
    { value: "top", text: "top next token" },
    { value: "17", text: "token id 17 (12.5%)" },
    { value: "loss", text: "loss" },
  ]);
  assert.deepEqual(targetOptions(status, { 17: "cat" }).map((o) => o.text)[1], 'token id 17 "cat" (12.5%)');
  const field = positionField(status);
  assert.equal(field.shown, true);
  assert.equal(field.label, "position");
  assert.equal(field.min, -8);
  assert.equal(field.max, 7);
});

test("an encoder-decoder's field says decoder position; token classification's picker says labels", () => {
  const decoder = { top: [], output: output({ kind: "sequence", words: "tokens", positions: 4, decoder: true }) };
  assert.equal(positionField(decoder).label, "decoder position");
  const tagger = { top: [[2, 0.3]], output: output({ kind: "sequence", words: "labels", positions: 6 }) };
  assert.deepEqual(
    targetOptions(tagger).map((o) => o.text),
    ["each token's top label", "label 2 (30.0%)"],
  );
});

test("an output with no scores offers a forward only, or its loss", () => {
  assert.deepEqual(targetOptions({ top: [], output: output({ kind: "none", tensor: null }) }), [
    { value: "top", text: "no scores: forward only" },
  ]);
  assert.deepEqual(targetOptions({ top: [], output: output({ kind: "scalar", loss: true }) }), [
    { value: "loss", text: "the output (a loss)" },
  ]);
  assert.deepEqual(targetOptions({ top: [], output: output({ kind: "none", loss: true }) }), [{ value: "loss", text: "loss" }]);
});

test("a status without output data (an older kernel) still offers classes", () => {
  assert.deepEqual(targetOptions({ top: [[0, 1]] }).map((o) => o.value), ["top", "0"]);
  assert.deepEqual(targetOptions({}).map((o) => o.value), ["top"]);
});

test("the run message's target and position: empty position is the last (null), only for sequences", () => {
  const field = { shown: true };
  assert.deepEqual(runChoice("top", "", field), { target: "top", position: null });
  assert.deepEqual(runChoice("17", "-2", field), { target: 17, position: -2 });
  assert.deepEqual(runChoice("loss", "3", field), { target: "loss", position: null });
  assert.deepEqual(runChoice("3", "5", { shown: false }), { target: 3, position: null });
  assert.deepEqual(runChoice("3", "1.5", field), { target: 3, position: 1.5 }); // refused in words by the kernel
});

test("an output unknown because the shape probe failed says so, not that the model has no scores", () => {
  const failed = output({ kind: "none", tensor: null, probe_failed: "the shape probe failed: RuntimeError: bad shape" });
  assert.deepEqual(targetOptions({ top: [], output: failed }), [{ value: "top", text: "the shape probe failed: RuntimeError: bad shape" }]);
});
