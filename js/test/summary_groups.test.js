import assert from "node:assert/strict";
import { test } from "node:test";
import { blockOf, filterMessage, groupRows, shownText, summaryLines } from "../src/summary_groups.js";

const BLOCKS = ["t.h.0", "t.h.1", "t.h.10"];
const paths = ["", "t", "t.wte", "t.h.0", "t.h.0.attn", "t.h.0.mlp", "t.h.1", "t.h.1.attn", "t.h.10.mlp", "t.ln_f", "head"];
const rows = paths.map((path) => ({ path }));

test("blockOf finds the block a module is in, and not one whose name it only starts with", () => {
  assert.equal(blockOf("t.h.1.attn", BLOCKS), "t.h.1");
  assert.equal(blockOf("t.h.10.mlp", BLOCKS), "t.h.10"); // not t.h.1
  assert.equal(blockOf("t.h.1", BLOCKS), "t.h.1");
  assert.equal(blockOf("t.wte", BLOCKS), null);
  assert.equal(blockOf("", []), null);
});

test("groupRows puts each block's rows under it, its own row as the head, outside rows in runs", () => {
  const groups = groupRows(rows, BLOCKS);
  assert.deepEqual(
    groups.map((g) => [g.block, g.head?.path ?? null, g.rows.map((r) => r.path)]),
    [
      [null, null, ["", "t", "t.wte"]],
      ["t.h.0", "t.h.0", ["t.h.0.attn", "t.h.0.mlp"]],
      ["t.h.1", "t.h.1", ["t.h.1.attn"]],
      ["t.h.10", null, ["t.h.10.mlp"]], // the filter dropped the block's own row: a header without one
      [null, null, ["t.ln_f", "head"]],
    ],
  );
});

test("groupRows keeps a sorted order: a group sits where its first row does", () => {
  const sorted = [{ path: "t.h.1.attn" }, { path: "t.wte" }, { path: "t.h.0.mlp" }, { path: "t.h.1" }];
  const groups = groupRows(sorted, BLOCKS);
  assert.deepEqual(groups.map((g) => g.block), ["t.h.1", null, "t.h.0"]);
  assert.deepEqual(groups[0].rows.map((r) => r.path), ["t.h.1.attn"]);
  assert.equal(groups[0].head?.path, "t.h.1");
});

test("groupRows without blocks is one group of every row", () => {
  assert.deepEqual(groupRows(rows, []).map((g) => g.rows.length), [rows.length]);
});

test("summaryLines folds a group to its header, which still counts its rows; inner rows are named in their block", () => {
  const lines = summaryLines(groupRows(rows, BLOCKS), new Set(["t.h.0"]));
  assert.deepEqual(
    lines.map((l) => (l.type === "group" ? `[${l.block} ${l.count} ${l.open ? "open" : "folded"}]` : `${l.name}${l.inner ? "@in" : ""}`)),
    ["", "t", "t.wte", "[t.h.0 2 folded]", "[t.h.1 1 open]", "attn@in", "[t.h.10 1 open]", "mlp@in", "t.ln_f", "head"],
  );
});

test("filterMessage sends the trimmed text, blocks only and the class", () => {
  assert.deepEqual(filterMessage({ text: "  attn ", blocksOnly: true, moduleClass: "" }), {
    type: "summary",
    filter: "attn",
    blocks_only: true,
    module_class: "",
  });
});

test("shownText says how many layers the filter keeps", () => {
  assert.equal(shownText(312, 312), "312 layers");
  assert.equal(shownText(24, 312), "24 of 312 layers");
  assert.equal(shownText(1, 1), "1 layer");
});
