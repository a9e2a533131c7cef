/** The labels along a grid's axes: which rows or columns get one (thinned to fit), and a long name cut from the left
 * to fit its width; pure, no DOM. */

import { axisLabel } from "./grid.js";

const NICE = [1, 2, 5];

/**
 * The indices of `count` cells spread over `extent` px that get a label at least `gap` px from the next: every
 * `stride`-th, the stride 1, 2, 5, 10, 20, 50… (so integer steps read as round numbers).
 * @param {number} count
 * @param {number} extent
 * @param {number} gap
 * @returns {number[]}
 */
export function thinIndices(count, extent, gap) {
  if (count <= 0 || extent <= 0) return [];
  const need = Math.max(1, gap / (extent / count));
  let stride = 1;
  for (let scale = 1; stride < need; scale *= 10) {
    stride = NICE.map((n) => n * scale).find((n) => n >= need) ?? 10 * scale;
  }
  return Array.from({ length: Math.ceil(count / stride) }, (_, k) => k * stride);
}

/**
 * `text` cut from the left with "…" until `measure` of it fits `width` (a layer's path keeps its last, most specific
 * parts); "" when not even "…" fits.
 * @param {string} text
 * @param {number} width
 * @param {(text: string) => number} measure
 */
export function fitLeft(text, width, measure) {
  if (measure(text) <= width) return text;
  let low = 1;
  let high = text.length; // the most characters cut; cutting all leaves "…"
  while (low < high) {
    const mid = Math.floor((low + high) / 2);
    if (measure(`…${text.slice(mid)}`) <= width) high = mid;
    else low = mid + 1;
  }
  const cut = `…${text.slice(low)}`;
  return measure(cut) <= width ? cut : "";
}

/**
 * A row's label: a layer's path as the tree names it ("(model)" for the root), others "rank 0".
 * @param {string | undefined} name what the rows are (`row_name`)
 * @param {string | undefined} value
 */
export function rowLabel(name, value) {
  const shown = axisLabel(name, value);
  return name && name !== "layer" ? `${name} ${shown}` : shown;
}

/**
 * Whether every column label is an integer (steps): those get thinned ticks; others only the first and last.
 * @param {string[] | undefined} columns
 */
export function integerColumns(columns) {
  return Array.isArray(columns) && columns.length > 0 && columns.every((c) => c !== "" && Number.isInteger(Number(c)));
}
