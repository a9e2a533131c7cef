import assert from "node:assert/strict";
import { test } from "node:test";
import { hasHook, hooksAt, indexHooks } from "../src/hooks.js";

const hooks = [
  { path: "features.0", kind: "forward", action: "capture", fired: 2, error: null },
  { path: "", kind: "global_forward", action: "stats", fired: 7, error: null },
  { path: "features.0", kind: "grad", action: "capture", fired: 1, error: "boom" },
  { path: "head", kind: "forward_pre", action: "print", fired: 0, error: null },
];

test("indexHooks groups by path in order", () => {
  const index = indexHooks(hooks);
  assert.deepEqual([...index.keys()], ["features.0", "", "head"]);
  assert.deepEqual(
    hooksAt(index, "features.0").map((hook) => hook.kind),
    ["forward", "grad"],
  );
  assert.equal(hooksAt(index, "").length, 1);
  assert.deepEqual(hooksAt(index, "missing"), []);
});

test("hasHook matches path and kind exactly", () => {
  const index = indexHooks(hooks);
  assert.equal(hasHook(index, "features.0", "forward"), true);
  assert.equal(hasHook(index, "features.0", "forward_pre"), false);
  assert.equal(hasHook(index, "head", "forward_pre"), true);
  assert.equal(hasHook(index, "features", "forward"), false);
  assert.equal(hasHook(index, "", "global_forward"), true);
});

test("indexHooks tolerates missing or malformed values", () => {
  assert.equal(indexHooks(undefined).size, 0);
  assert.equal(indexHooks({}).size, 0);
  assert.equal(indexHooks([null, { kind: "forward" }, 3]).size, 0);
});

test("hasHook ignores hooks others attached", () => {
  const index = indexHooks([
    { path: "head", kind: "forward", foreign: true },
    { path: "head", kind: "grad", foreign: false },
  ]);
  assert.equal(hasHook(index, "head", "forward"), false);
  assert.equal(hasHook(index, "head", "grad"), true);
  assert.equal(hooksAt(index, "head").length, 2);
});
