/** Binary buffers from ipywidgets as bytes; pure, no DOM. */

/**
 * View `value` (DataView, ArrayBuffer, typed array or list of byte values) as a Uint8Array;
 * null when it holds no bytes. Views keep their offset: ipywidgets may slice a larger buffer.
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

/** A byte count for people: 512 B, 1.5 KiB, 256 MiB, 1.2 GiB. */
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
