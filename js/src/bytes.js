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
