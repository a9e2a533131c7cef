import assert from "node:assert/strict";
import { test } from "node:test";
import { describeMemory, toBytes } from "../src/bytes.js";

const PNG_MAGIC = [0x89, 0x50, 0x4e, 0x47];

test("toBytes reads a DataView over part of a larger buffer", () => {
  const buffer = new Uint8Array([0, 0, ...PNG_MAGIC, 0]).buffer;
  const bytes = toBytes(new DataView(buffer, 2, 4));
  assert.deepEqual([...bytes], PNG_MAGIC);
});

test("toBytes accepts ArrayBuffer, Uint8Array, other typed arrays and plain lists", () => {
  assert.deepEqual([...toBytes(new Uint8Array(PNG_MAGIC).buffer)], PNG_MAGIC);
  const u8 = new Uint8Array(PNG_MAGIC);
  assert.equal(toBytes(u8), u8);
  assert.deepEqual([...toBytes(new Uint16Array([0x0201]))].sort(), [1, 2]);
  assert.deepEqual([...toBytes(PNG_MAGIC)], PNG_MAGIC);
});

test("toBytes returns null for values that hold no bytes", () => {
  assert.equal(toBytes(undefined), null);
  assert.equal(toBytes(null), null);
  assert.equal(toBytes("iVBORw0KGgo="), null);
  assert.equal(toBytes({}), null);
});

test("formatBytes reads like a person would write it", async () => {
  const { formatBytes } = await import("../src/bytes.js");
  assert.equal(formatBytes(512), "512 B");
  assert.equal(formatBytes(1536), "1.5 KiB");
  assert.equal(formatBytes(256 * 2 ** 20), "256 MiB");
  assert.equal(formatBytes(1.25 * 2 ** 30), "1.3 GiB");
  assert.equal(formatBytes(-1), "—");
});

test("describeMemory says when the budget holds less than one step, and which hooks lost records", () => {
  const fine = describeMemory({ bytes: 1536, budget: 256 * 1024 ** 2, records: 3, evicted: 0, short_steps: [] });
  assert.deepEqual(fine, {
    text: "1.5 KiB of 256 MiB",
    evicting: false,
    warning: "",
    title: "3 records kept, 0 evicted (oldest first) to stay under the budget",
  });
  const note = "the budget (1.0 MiB) holds less than one step: step 1 lost 1 'forward' record (call 0) before it ended; raise memory_budget";
  const short = describeMemory({
    bytes: 1024 ** 2,
    budget: 1024 ** 2,
    records: 1,
    evicted: 1,
    short_steps: [{ path: "", kind: "forward", note }],
  });
  assert.equal(short.warning, "less than one step");
  assert.deepEqual(short.title.split("\n"), [
    "The budget holds less than one step: raise memory_budget.",
    `forward on (model): ${note}`,
    "1 records kept, 1 evicted (oldest first) to stay under the budget",
  ]);
  assert.equal(describeMemory({}).warning, "");
});

test("describeMemory says in words that a full budget is evicting captures, and how to keep more", () => {
  const full = describeMemory({ bytes: 1024 ** 2, budget: 1024 ** 2, records: 4, evicted: 9, evicting: true, short_steps: [] });
  assert.equal(full.text, "1.0 MiB of 1.0 MiB · evicting");
  assert.equal(full.evicting, true);
  assert.deepEqual(full.title.split("\n"), [
    "The budget is full: each new capture evicts the oldest. Raise memory_budget to keep more.",
    "4 records kept, 9 evicted (oldest first) to stay under the budget",
  ]);
  // Cleared since: records were evicted once, but the store is no longer full.
  const cleared = describeMemory({ bytes: 0, budget: 1024 ** 2, records: 0, evicted: 9, evicting: false, short_steps: [] });
  assert.equal(cleared.text, "0 B of 1.0 MiB");
  assert.equal(cleared.evicting, false);
});
