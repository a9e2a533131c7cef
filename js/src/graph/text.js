/** Text of graph tooltips and labels: byte sizes and saved-tensor lines; pure, no DOM. */

const BYTE_UNITS = ["B", "KB", "MB", "GB", "TB"];

/**
 * Bytes in binary units: 512 -> "512 B", 1536 -> "1.5 KB", 3 * 2 ** 20 -> "3 MB".
 * @param {unknown} n
 */
export function formatBytes(n) {
  if (typeof n !== "number" || !Number.isFinite(n) || n < 0) return "—";
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  const text = unit === 0 || value >= 100 ? value.toFixed(0) : value.toFixed(1).replace(/\.0$/, "");
  return `${text} ${BYTE_UNITS[unit]}`;
}

/**
 * Tooltip lines for one node's saved tensors, from a payload entry [node, ownBytes, count, list|null];
 * list items are [name, shape, dtype, bytes, alias]. Large graphs send totals only (list null).
 * @param {unknown[]} entry
 */
export function savedTitle(entry) {
  const [, own, count, list] = /** @type {[number, number, number, unknown[][] | null]} */ (entry);
  const lines = [`saved for backward: ${count} tensor${count === 1 ? "" : "s"}, ${formatBytes(own)} of its own`];
  for (const [name, shape, dtype, bytes, alias] of list ?? []) {
    const dims = Array.isArray(shape) ? (shape.length ? shape.join("×") : "scalar") : "?";
    const shared = alias ? ` = ${alias}` : "";
    lines.push(`  ${[`${name}:`, dims, dtype, formatBytes(bytes)].filter(Boolean).join(" ")}${shared}`);
  }
  return lines;
}

/**
 * Module scope of an autograd node id ("layer1.0/AddBackward0#0" -> "layer1.0"); null for no node id.
 * @param {unknown} id
 */
export function nodeScope(id) {
  if (typeof id !== "string") return null;
  const slash = id.lastIndexOf("/");
  return slash < 0 || !id.includes("#", slash) ? null : id.slice(0, slash);
}

/**
 * `text` cut to at most `max` characters with "…" in the middle (a path's start and its last name both stay).
 * @param {unknown} text
 * @param {number} max
 */
export function ellipsize(text, max) {
  const chars = Array.from(String(text));
  if (chars.length <= max) return String(text);
  if (max <= 1) return "…";
  const tail = Math.floor((max - 1) / 2);
  const head = max - 1 - tail;
  return `${chars.slice(0, head).join("")}…${chars.slice(chars.length - tail).join("")}`;
}
