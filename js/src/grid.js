/** The run view's grids (layers × steps, ranks × layers): decoding, colours, the cell under the mouse and what it
 * reads; pure, no DOM. */

import { displayPath } from "./format.js";
import { formatStat } from "./summary.js";

export const FLAG_MISSING = 0;
export const FLAG_VALUE = 1;
export const FLAG_NONFINITE = 2;
export const NONFINITE_RGB = [255, 0, 255]; // magenta, as the kernel's figures mark NaN/Inf
const MISSING_LIGHT = [217, 217, 217]; // the figures' "no record" grey in each theme (hookwidgets/plots/theme.py)
const MISSING_DARK = [74, 74, 74];

// matplotlib's viridis at 9 evenly spaced points: the colours between are interpolated.
const VIRIDIS = [
  [68, 1, 84],
  [71, 44, 122],
  [59, 81, 139],
  [44, 113, 142],
  [33, 144, 141],
  [39, 173, 129],
  [92, 200, 99],
  [170, 220, 50],
  [253, 231, 37],
];

/**
 * A grid as the page uses it: its payload, with values and flags as typed arrays.
 * @typedef {{grid: Partial<import("./payloads.js").Grid>, rows: number, columns: number, values: Float32Array,
 *   flags: Uint8Array}} Decoded
 */

/**
 * The grid's values (float32, little-endian) and flags (a byte per cell) out of their buffers; a grid whose buffers
 * do not hold rows × columns cells is read as empty.
 * @param {Partial<import("./payloads.js").Grid> | null | undefined} grid
 * @returns {Decoded}
 */
export function decodeGrid(grid) {
  const safe = grid ?? {};
  const rows = Array.isArray(safe.rows) ? safe.rows.length : 0;
  const columns = Array.isArray(safe.columns) ? safe.columns.length : 0;
  const count = rows * columns;
  const values = new Float32Array(count);
  const flags = new Uint8Array(count);
  const valueView = safe.values;
  const flagView = safe.flags;
  if (!valueView || !flagView || valueView.byteLength < count * 4 || flagView.byteLength < count) {
    return { grid: safe, rows: 0, columns: 0, values: new Float32Array(0), flags: new Uint8Array(0) };
  }
  for (let i = 0; i < count; i++) {
    values[i] = valueView.getFloat32(i * 4, true);
    flags[i] = flagView.getUint8(i);
  }
  return { grid: safe, rows, columns, values, flags };
}

/**
 * The colour scale of the values recorded without NaN/Inf: their range, on a log scale when all are positive and span more than
 * a factor of 10. `low`/`high` are null when there is no such value.
 * @param {Float32Array} values
 * @param {Uint8Array} flags
 */
export function colorScale(values, flags) {
  let low = Infinity;
  let high = -Infinity;
  for (let i = 0; i < values.length; i++) {
    const v = values[i];
    if (flags[i] !== FLAG_VALUE || !Number.isFinite(v)) continue; // NaN/Inf cells are magenta, off the scale
    if (v < low) low = v;
    if (v > high) high = v;
  }
  if (low > high) return { low: null, high: null, log: false };
  const log = low > 0 && high / low > 10;
  return { low, high, log };
}

/**
 * viridis at `t` in [0, 1] (clamped) as `[r, g, b]`.
 * @param {number} t
 */
export function viridis(t) {
  const x = Math.max(0, Math.min(1, Number.isFinite(t) ? t : 0)) * (VIRIDIS.length - 1);
  const i = Math.min(VIRIDIS.length - 2, Math.floor(x));
  const f = x - i;
  return [0, 1, 2].map((c) => Math.round(VIRIDIS[i][c] + (VIRIDIS[i + 1][c] - VIRIDIS[i][c]) * f));
}

/**
 * A cell's colour: magenta for NaN/Inf (flagged, or a non-finite value), the theme's grey for no record, else its
 * value on `scale` in viridis.
 * @param {number} value
 * @param {number} flag
 * @param {{low: number | null, high: number | null, log: boolean}} scale
 * @param {boolean} dark the page's theme
 */
export function cellColor(value, flag, scale, dark) {
  if (flag === FLAG_MISSING) return dark ? MISSING_DARK : MISSING_LIGHT;
  if (flag === FLAG_NONFINITE || !Number.isFinite(value)) return NONFINITE_RGB;
  if (scale.low === null || scale.high === null || scale.high === scale.low) return viridis(0.5);
  const t = scale.log
    ? (Math.log(value) - Math.log(scale.low)) / (Math.log(scale.high) - Math.log(scale.low))
    : (value - scale.low) / (scale.high - scale.low);
  return viridis(t);
}

/**
 * The cell under a point `x`, `y` of a box `width` × `height` showing `rows` × `columns` cells; null outside.
 * @param {number} x
 * @param {number} y
 * @param {number} width
 * @param {number} height
 * @param {number} rows
 * @param {number} columns
 */
export function cellAt(x, y, width, height, rows, columns) {
  if (rows <= 0 || columns <= 0 || width <= 0 || height <= 0) return null;
  if (x < 0 || y < 0 || x >= width || y >= height) return null;
  return { row: Math.floor((y / height) * rows), column: Math.floor((x / width) * columns) };
}

/**
 * The column of the heatmap showing `step` (its columns are labelled by step); null when it is not shown.
 * @param {string[] | null | undefined} columns
 * @param {number | null | undefined} step
 */
export function columnOfStep(columns, step) {
  if (!Array.isArray(columns) || step === null || step === undefined) return null;
  const at = columns.indexOf(String(step));
  return at < 0 ? null : at;
}

/**
 * The step of a heatmap column (null for a label that is not a step).
 * @param {string | null | undefined} label
 */
export function stepOfColumn(label) {
  const step = Number(label);
  return label !== null && label !== undefined && label !== "" && Number.isInteger(step) ? step : null;
}

/**
 * The height in CSS pixels of a grid of `rows`: 14 px a row for few, at least 2 px a row, within [48, 320] px unless
 * the rows need more.
 * @param {number} rows
 */
export function gridHeight(rows) {
  if (rows <= 0) return 0;
  const each = Math.max(2, Math.min(14, Math.floor(320 / rows)));
  return Math.max(48, rows * each);
}

/**
 * What a cell reads on hover: "layer encoder.0 · step 3 · act_norm = 1.234", with "held NaN/Inf" or "no record".
 * Names are shown as `displayPath` shows them (cut, invisible characters escaped); the text is set as text.
 * @param {Decoded} decoded
 * @param {number} row
 * @param {number} column
 * @param {string} field
 */
export function cellText(decoded, row, column, field) {
  const { grid } = decoded;
  const rowLabel = label(grid.row_name, grid.rows?.[row]);
  const columnLabel = label(grid.column_name, grid.columns?.[column]);
  const i = row * decoded.columns + column;
  const flag = decoded.flags[i];
  const value = decoded.values[i];
  const where = `${rowLabel} · ${columnLabel}`;
  if (flag === FLAG_MISSING || flag === undefined) return `${where} · no record`;
  const text = Number.isNaN(value) ? "nan" : Number.isFinite(value) ? formatStat(field, value) : value > 0 ? "inf" : "-inf";
  return `${where} · ${field} = ${text}${flag === FLAG_NONFINITE ? " · held NaN/Inf" : ""}`;
}

/**
 * "layer encoder.0", "rank 3", "step 12".
 * @param {string | undefined} name
 * @param {string | undefined} value
 */
function label(name, value) {
  const shown = axisLabel(name, value);
  return name ? `${name} ${shown}` : shown;
}

/**
 * A row's or column's label as shown: a layer's path as `displayPath` shows it (the root "(model)"), others as sent.
 * @param {string | undefined} name what the rows or columns are (`row_name`, `column_name`)
 * @param {string | undefined} value
 */
export function axisLabel(name, value) {
  return name === "layer" ? displayPath(value ?? "") : String(value ?? "");
}

/**
 * The sentence stating the first non-finite value of a run, or "" when there is none.
 * @param {import("./payloads.js").FirstNonfinite | null | undefined} first
 */
export function nonfiniteText(first) {
  if (!first) return "";
  return `First NaN/Inf: step ${first.step}, rank ${first.rank}, in ${displayPath(first.path)} (${first.kind}, ${first.phase})`;
}

/**
 * A CSS linear-gradient of viridis, for the colour legend.
 */
export function rampCss() {
  const stops = VIRIDIS.map((rgb, i) => `rgb(${rgb.join(", ")}) ${Math.round((i / (VIRIDIS.length - 1)) * 100)}%`);
  return `linear-gradient(to right, ${stops.join(", ")})`;
}
