/** What a figure tells under the mouse: the cell or point at a place in the image, in words, from the figure's
 * `Hover` (hookwidgets/plots/hover.py); pure, no DOM. Coordinates are the image's CSS pixels, origin top-left. */

import { toBytes } from "./bytes.js";

/** @typedef {import("./payloads.js").Hover} Hover */
/** @typedef {import("./payloads.js").HoverAxis} HoverAxis */
/** @typedef {import("./payloads.js").CellsRegion} CellsRegion */
/** @typedef {import("./payloads.js").LinesRegion} LinesRegion */

/**
 * A region with its values decoded: cells' `values` (rows × cols, row-major) or each series' `values` (one per x).
 * @typedef {{type: "cells", region: CellsRegion, values: Float32Array}
 *   | {type: "lines", region: LinesRegion, xs: Float64Array, series: {name: string, values: Float32Array}[]}} Decoded
 */

/**
 * Where the readout is: a cell (`row`, `col`) of a cells region, or a point (`index`) of a lines region.
 * @typedef {{region: number, row: number, col: number, index: number}} Spot
 */

/**
 * Little-endian floats of `size` bytes (4 or 8) as numbers (any alignment; a trailing partial value is left out).
 * @param {unknown} value
 * @param {4 | 8} size
 */
function floats(value, size) {
  const bytes = toBytes(value);
  const count = bytes ? Math.floor(bytes.byteLength / size) : 0;
  const out = size === 4 ? new Float32Array(count) : new Float64Array(count);
  if (!bytes) return out;
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let i = 0; i < count; i += 1) out[i] = size === 4 ? view.getFloat32(i * 4, true) : view.getFloat64(i * 8, true);
  return out;
}

/**
 * float32 little-endian bytes as numbers: a figure's values.
 * @param {unknown} value
 */
export const float32s = (value) => /** @type {Float32Array} */ (floats(value, 4));

/**
 * float64 little-endian bytes as numbers: a line chart's x values.
 * @param {unknown} value
 */
export const float64s = (value) => /** @type {Float64Array} */ (floats(value, 8));

/**
 * Every region of `hover` with its values decoded, once per payload; [] for none.
 * @param {Hover | null | undefined} hover
 * @returns {Decoded[]}
 */
export function decodeHover(hover) {
  const regions = Array.isArray(hover?.regions) ? hover.regions : [];
  return regions.map((region) =>
    region.type === "cells"
      ? { type: "cells", region, values: float32s(region.values) }
      : {
          type: "lines",
          region,
          xs: float64s(region.x),
          series: region.series.map((s) => ({ name: s.name, values: float32s(s.values) })),
        },
  );
}

/**
 * The index of the equal slice of [from, to] (either way round) that `at` falls in, or -1 outside.
 * @param {number} at
 * @param {number} from
 * @param {number} to
 * @param {number} count
 */
function slice(at, from, to, count) {
  if (to === from || count < 1) return -1;
  const t = (at - from) / (to - from);
  if (!(t >= 0 && t <= 1)) return -1;
  return Math.min(count - 1, Math.floor(t * count));
}

/**
 * The spot of region `index` at (`x`, `y`), or null when the place is outside it.
 * @param {Decoded} decoded
 * @param {number} index
 * @param {number} x
 * @param {number} y
 * @returns {Spot | null}
 */
function spotIn(decoded, index, x, y) {
  const [x0, y0, x1, y1] = decoded.region.box;
  if (decoded.type === "cells") {
    const { rows, cols } = decoded.region;
    const col = slice(x, x0, x1, cols);
    const row = slice(y, y0, y1, rows);
    return col < 0 || row < 0 ? null : { region: index, row, col, index: 0 };
  }
  if (slice(x, x0, x1, 1) < 0 || slice(y, y0, y1, 1) < 0) return null;
  const xs = decoded.xs;
  if (xs.length === 0) return null;
  const [lo, hi] = decoded.region.x_limits;
  const at = lo + ((x - x0) / (x1 - x0)) * (hi - lo);
  let best = 0;
  for (let i = 1; i < xs.length; i += 1) if (Math.abs(xs[i] - at) < Math.abs(xs[best] - at)) best = i;
  return { region: index, row: 0, col: 0, index: best };
}

/**
 * The cell or point under (`x`, `y`) (the image's CSS pixels): the last region drawn there wins; null over none.
 * @param {Decoded[]} decoded
 * @param {number} x
 * @param {number} y
 * @returns {Spot | null}
 */
export function locate(decoded, x, y) {
  for (let i = decoded.length - 1; i >= 0; i -= 1) {
    const spot = spotIn(decoded[i], i, x, y);
    if (spot) return spot;
  }
  return null;
}

/**
 * A number as the readout writes it: 4 significant digits, NaN and ±Inf as themselves.
 * @param {number} value
 */
export function formatValue(value) {
  if (Number.isNaN(value)) return "NaN";
  if (!Number.isFinite(value)) return value > 0 ? "Inf" : "-Inf";
  return String(Number(value.toPrecision(4)));
}

/** @param {string} name */
function plural(name) {
  if (/[^aeiou]y$/.test(name)) return `${name.slice(0, -1)}ies`;
  return /(s|x|ch|sh)$/.test(name) ? `${name}es` : `${name}s`;
}

/**
 * What drawn row or column `i` of `axis` is: `token 5 "cat"`, or `features 8–11` when it covers several.
 * @param {HoverAxis} axis
 * @param {number} i
 */
export function axisText(axis, i) {
  const stride = Math.max(1, axis.stride || 1);
  const first = (axis.start || 0) + i * stride;
  const last = Math.min(first + stride - 1, (axis.start || 0) + Math.max(axis.count || 0, 1) - 1);
  const label = Array.isArray(axis.labels) && i < axis.labels.length ? axis.labels[i] : null;
  const which = last > first ? `${plural(axis.name)} ${first}–${last}` : `${axis.name} ${first}`;
  return label !== null && label !== String(first) ? `${which} "${label}"` : which;
}

/**
 * The readout at `spot`: its `text` and `value` (the float32 value, null when there is none).
 * @param {Decoded[]} decoded
 * @param {Spot} spot
 * @returns {{text: string, value: number | null}}
 */
export function readout(decoded, spot) {
  const part = decoded[spot.region];
  if (!part) return { text: "", value: null };
  const words = part.region.label ? [part.region.label] : [];
  if (part.type === "cells") {
    const { cols, row, col, aggregate } = part.region;
    const value = part.values[spot.row * cols + spot.col];
    if (value === undefined) return { text: "", value: null };
    words.push(axisText(row, spot.row), axisText(col, spot.col));
    words.push(aggregate ? `${aggregate} ${formatValue(value)}` : formatValue(value));
    return { text: words.join(" · "), value };
  }
  words.push(`${part.region.x_name} ${formatValue(part.xs[spot.index])}`);
  for (const series of part.series) words.push(`${series.name} ${formatValue(series.values[spot.index])}`);
  const first = part.series[0]?.values[spot.index];
  return { text: words.join(" · "), value: first === undefined ? null : first };
}

/**
 * Where an arrow key moves the readout from `spot`, on screen (a flipped axis moves the other way); it stays at
 * the edges. Lines move left and right only.
 * @param {Decoded[]} decoded
 * @param {Spot} spot
 * @param {string} key "ArrowLeft", "ArrowRight", "ArrowUp" or "ArrowDown"
 * @returns {Spot}
 */
export function move(decoded, spot, key) {
  const part = decoded[spot.region];
  if (!part) return spot;
  const [x0, y0, x1, y1] = part.region.box;
  const dx = key === "ArrowRight" ? 1 : key === "ArrowLeft" ? -1 : 0;
  const dy = key === "ArrowDown" ? 1 : key === "ArrowUp" ? -1 : 0;
  /** @param {number} v @param {number} n */
  const clamp = (v, n) => Math.max(0, Math.min(n - 1, v));
  if (part.type === "lines") return { ...spot, index: clamp(spot.index + dx, part.xs.length) };
  const col = clamp(spot.col + (x1 < x0 ? -dx : dx), part.region.cols);
  const row = clamp(spot.row + (y1 < y0 ? -dy : dy), part.region.rows);
  return { ...spot, row, col };
}

/**
 * The box to outline at `spot`, in the image's CSS pixels: the cell, or a vertical line through the point.
 * @param {Decoded[]} decoded
 * @param {Spot} spot
 * @returns {{left: number, top: number, width: number, height: number} | null}
 */
export function highlight(decoded, spot) {
  const part = decoded[spot.region];
  if (!part) return null;
  const [x0, y0, x1, y1] = part.region.box;
  if (part.type === "cells") {
    const w = (x1 - x0) / part.region.cols;
    const hh = (y1 - y0) / part.region.rows;
    const ax = x0 + spot.col * w;
    const ay = y0 + spot.row * hh;
    return { left: Math.min(ax, ax + w), top: Math.min(ay, ay + hh), width: Math.abs(w), height: Math.abs(hh) };
  }
  const [lo, hi] = part.region.x_limits;
  const px = x0 + ((part.xs[spot.index] - lo) / (hi - lo || 1)) * (x1 - x0);
  return { left: px, top: Math.min(y0, y1), width: 0, height: Math.abs(y1 - y0) };
}

/**
 * The readout of a logit-lens cell: `layer 3 transformer.h.3 · position 5 "cat" · top "the" 0.4312`.
 * @param {{layer: number, layerName: string, position: number, token: string, top: string, probability: number}} cell
 */
export function lensReadout({ layer, layerName, position, token, top, probability }) {
  const where = layerName ? `layer ${layer} ${layerName}` : `layer ${layer}`;
  const at = token ? `position ${position} "${token}"` : `position ${position}`;
  return `${where} · ${at} · top "${top}" ${formatValue(probability)}`;
}
