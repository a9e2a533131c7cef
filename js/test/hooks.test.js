import assert from "node:assert/strict";
import { test } from "node:test";
import { badgeCount, hasHook, hooksAt, indexHooks, runEdits } from "../src/hooks.js";

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

test("badgeCount counts a global kind's steps, not its firings summed over modules", () => {
  const kinds = [
    { kind: "forward", name: "forward", family: "module", phase: "forward", tip: "", badge: "fwd", every_layer: false },
    { kind: "global_forward", name: "global_forward", family: "global", phase: "forward", tip: "", badge: "all", every_layer: true },
  ];
  const global = { path: "", kind: "global_forward", action: "stats", edit: [], fired: 960, steps: 3, error: null, note: null, foreign: false };
  assert.deepEqual(badgeCount(kinds, global), {
    count: 3,
    text: "fired in 3 steps, on 320 modules a step (960 times in all)",
  });
  const module = { ...global, path: "fc", kind: "forward", fired: 5, steps: 5 };
  assert.deepEqual(badgeCount(kinds, module), { count: 5, text: "fired 5 times" });
  assert.equal(badgeCount(kinds, { ...global, fired: 0, steps: 0 }).count, 0);
  assert.equal(badgeCount(kinds, { ...global, fired: 7, steps: 2 }).text, "fired in 2 steps, on ~4 modules a step (7 times in all)");
});

test("the run bar names every edit attached, in attach order, and says nothing without one", () => {
  const edited = [
    { path: "h.0.attn", kind: "forward", edit: [["ablate_heads", [1, 3]]], edit_label: "ablate_heads [1, 3] at forward on 'h.0.attn'", foreign: false },
    { path: "h.0", kind: "forward", edit: [], edit_label: "", foreign: false },
    { path: "fc", kind: "grad", edit: [["scale", 2]], edit_label: "scale 2 at grad on 'fc'", foreign: false },
  ];
  const said = runEdits(edited);
  assert.equal(said.text, "running with 2 edits: ablate_heads [1, 3] at forward on 'h.0.attn'; scale 2 at grad on 'fc'");
  assert.deepEqual(said.title.split("\n").slice(1), ["ablate_heads [1, 3] at forward on 'h.0.attn'", "scale 2 at grad on 'fc'"]);
  assert.equal(runEdits(edited.slice(0, 1)).text, "running with 1 edit: ablate_heads [1, 3] at forward on 'h.0.attn'");
  assert.deepEqual(runEdits(hooks), { text: "", title: "" });
  assert.deepEqual(runEdits(null), { text: "", title: "" });
});
