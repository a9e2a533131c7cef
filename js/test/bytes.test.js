import assert from "node:assert/strict";
import { test } from "node:test";
import { toBytes } from "../src/bytes.js";

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
