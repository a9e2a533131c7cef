/** Binary buffers from ipywidgets as bytes, and byte counts for people; pure, no DOM. */

import { displayPath } from "./format.js";

/** @typedef {import("./payloads.js").Memory} Memory */

/**
 * View `value` (DataView, ArrayBuffer, typed array or list of byte values) as a Uint8Array;
 * null when it holds no bytes. Views keep their offset: ipywidgets may slice a larger buffer.
 * @param {unknown} value
 */
export function toBytes(value) {
  if (value instanceof Uint8Array) return value;
  if (ArrayBuffer.isView(value)) {
    return new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
  }
  if (value instanceof ArrayBuffer) return new Uint8Array(value);
  if (Array.isArray(value)) return Uint8Array.from(value);
  return null;
}

/**
 * A byte count for people: 512 B, 1.5 KiB, 256 MiB, 1.2 GiB.
 * @param {unknown} n
 */
export function formatBytes(n) {
  const value = Number(n);
  if (!Number.isFinite(value) || value < 0) return "—";
  if (value < 1024) return `${Math.round(value)} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let scaled = value;
  for (const unit of units) {
    scaled /= 1024;
    if (scaled < 1024 || unit === "TiB") return `${scaled < 10 ? scaled.toFixed(1) : Math.round(scaled)} ${unit}`;
  }
  return `${value} B`;
}

const SHORT_STEP = "The budget holds less than one step: raise memory_budget.";

const EVICTING = "The budget is full: each new capture evicts the oldest. Raise memory_budget to keep more.";

/**
 * The memory meter's words for a `memory` payload: `text` ("1.5 MiB of 256 MiB", then "· evicting" while the store
 * is full), `evicting` (whether it is), `warning` ("" or "less than one step" when the budget evicted records of
 * the step being recorded) and `title` (the details: counts, then each hook that lost records and its note).
 * @param {Partial<Memory> | null | undefined} memory
 */
export function describeMemory(memory) {
  const used = Number(memory?.bytes ?? 0);
  const budget = Number(memory?.budget ?? 0);
  const short = Array.isArray(memory?.short_steps) ? memory.short_steps : [];
  const evicting = memory?.evicting === true;
  const counts = `${memory?.records ?? 0} records kept, ${Number(memory?.evicted ?? 0)} evicted (oldest first) to stay under the budget`;
  const lines = short.map((s) => `${s.kind} on ${displayPath(s.path)}: ${s.note}`);
  const size = budget > 0 ? `${formatBytes(used)} of ${formatBytes(budget)}` : "";
  return {
    text: evicting ? [size, "evicting"].filter(Boolean).join(" · ") : size,
    evicting,
    warning: short.length > 0 ? "less than one step" : "",
    title: [...(short.length > 0 ? [SHORT_STEP, ...lines] : []), ...(evicting ? [EVICTING] : []), counts].join("\n"),
  };
}
