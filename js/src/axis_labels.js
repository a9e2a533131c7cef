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
  const stride = niceStride(Math.max(1, gap / (extent / count)));
  return Array.from({ length: Math.ceil(count / stride) }, (_, k) => k * stride);
}

/**
 * The smallest of 1, 2, 5, 10, 20, 50… at least `need`.
 * @param {number} need
 */
function niceStride(need) {
  for (let scale = 1; ; scale *= 10) {
    const stride = NICE.map((n) => n * scale).find((n) => n >= need);
    if (stride !== undefined) return stride;
  }
}

/**
 * The columns of integer `steps` spread over `extent` px that get a tick at least `gap` px from the last: those whose
 * step is a multiple of a round stride (10, 20, 30… as a chart's axis reads), the first and any left between kept
 * only where they have room.
 * @param {number[]} steps ascending
 * @param {number} extent
 * @param {number} gap
 * @returns {number[]}
 */
export function stepTicks(steps, extent, gap) {
  const count = steps.length;
  if (count === 0 || extent <= 0) return [];
  const pitch = extent / count;
  const span = count > 1 ? (steps[count - 1] - steps[0]) / (count - 1) : 1; // steps per column
  const stride = niceStride(Math.max(1, (gap / pitch) * span));
  /** @type {number[]} */
  const ticks = [];
  steps.forEach((step, j) => {
    if (step % stride !== 0 && stride > 1) return;
    if (ticks.length > 0 && (j - ticks[ticks.length - 1]) * pitch < gap) return;
    ticks.push(j);
  });
  return ticks;
}

/**
 * `shown` with `row` (the selected layer's) labelled too: the labels within `gap` px of it dropped.
 * @param {number[]} shown
 * @param {number | null} row
 * @param {number} pitch px a row
 * @param {number} gap
 */
export function withRow(shown, row, pitch, gap) {
  if (row === null || row < 0 || shown.includes(row)) return shown;
  return [...shown.filter((i) => Math.abs(i - row) * pitch >= gap), row].sort((a, b) => a - b);
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
