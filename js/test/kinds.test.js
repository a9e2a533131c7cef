import assert from "node:assert/strict";
import { test } from "node:test";
import { badgeLabel, everyLayerKinds, groupKinds, kindOrder, kindRow, kindTip, kindTitle } from "../src/kinds.js";
import { sampleKinds } from "./fixtures.js";

const KINDS = sampleKinds();

test("a kind's tooltip comes from the table the kernel sent; a parameter's grad is told from a module's", () => {
  for (const row of KINDS) assert.equal(kindTip(KINDS, row.kind, row.family), row.tip, `${row.family} ${row.kind}`);
  assert.match(kindTip(KINDS, "grad"), /module's output/);
  assert.match(kindTip(KINDS, "grad", "param"), /parameter's gradient/);
  assert.match(kindTip(KINDS, "param_grad"), /parameter's gradient/); // the engine's name finds its row too
  assert.match(kindTip(KINDS, "global_grad", "module"), /every module's output/); // a global kind on the model
  assert.equal(kindTitle(KINDS, "forward"), "forward: the module's output, each time its forward returns");
  assert.equal(kindTitle(KINDS, "nope"), "nope");
  assert.equal(kindTitle(null, "forward"), "forward"); // no table yet: the name alone
  assert.equal(kindRow(KINDS, "constructor"), null);
});

test("badges: the table's text for each kind, the name itself for a kind it does not have", () => {
  assert.equal(badgeLabel(KINDS, "forward_pre"), "pre");
  assert.equal(badgeLabel(KINDS, "forward"), "fwd");
  assert.equal(badgeLabel(KINDS, "grad"), "grad");
  assert.equal(badgeLabel(KINDS, "backward"), "backward");
  assert.equal(badgeLabel(KINDS, "post_accumulate"), "post_accumulate");
  // Inherited object keys must not be mistaken for labels.
  assert.equal(badgeLabel(KINDS, "constructor"), "constructor");
  assert.equal(badgeLabel(undefined, "forward"), "forward");
});

test("the display order and the kinds of Stats on every layer are read from the table", () => {
  assert.deepEqual(kindOrder(KINDS), ["forward_pre", "forward", "backward", "grad", "global_forward", "global_backward",
    "global_grad", "post_accumulate", "node_pre", "node"]);
  assert.deepEqual(everyLayerKinds(KINDS), ["global_forward", "global_grad"]);
  const more = [...KINDS, { kind: "global_fake", name: "global_fake", family: "global", phase: "forward", tip: "", badge: "f", every_layer: true, common: false }];
  assert.deepEqual(everyLayerKinds(more), ["global_forward", "global_grad", "global_fake"]);
  assert.deepEqual(kindOrder(["forward", null, 3]), []); // not rows: nothing
});

test("the inspector's groups: forward and grad first, the rest under More kinds; one group when nothing is common", () => {
  const module = ["forward_pre", "forward", "backward", "grad"];
  assert.deepEqual(groupKinds(KINDS, module), { common: ["forward", "grad"], more: ["forward_pre", "backward"] });
  const root = [...module, "global_forward", "global_grad"];
  assert.deepEqual(groupKinds(KINDS, root).more, ["forward_pre", "backward", "global_forward", "global_grad"]);
  assert.deepEqual(groupKinds(KINDS, ["grad", "post_accumulate"], "param"), { common: ["grad"], more: ["post_accumulate"] });
  assert.deepEqual(groupKinds(KINDS, ["node_pre", "node"], "node"), { common: ["node_pre", "node"], more: [] });
  assert.deepEqual(groupKinds(null, module), { common: module, more: [] }); // no table yet: one group, as before
});
