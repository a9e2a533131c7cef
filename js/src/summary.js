/** The summary table's rows: sorting and number formatting; pure, no DOM. */

import { formatCount } from "./format.js";

/**
 * A row of the table: the layer's `path`, each recorded field's value (a number, or "nan"/"inf"/"-inf").
 * @typedef {{path: string} & Record<string, number | string>} SummaryRow
 */

/**
 * Columns of the table: field and header, in display order; the header says its side in the row above
 * (`COLUMN_SIDES`), so that the columns stay narrow.
 * @type {[string, string][]}
 */
export const COLUMNS = [
  ["path", "layer"],
  ["act_norm", "‖·‖"],
  ["act_mean", "mean"],
  ["act_zero_fraction", "zeros"],
  ["act_nan", "NaN"],
  ["act_inf", "Inf"],
  ["grad_norm", "‖·‖"],
  ["grad_zero_fraction", "zeros"],
  ["grad_nan", "NaN"],
  ["grad_inf", "Inf"],
];

/**
 * The header's first row: each side's name and how many of `COLUMNS` (after the path) it spans.
 * @type {[string, number][]}
 */
export const COLUMN_SIDES = [
  ["activation", 5],
  ["gradient", 4],
];

/**
 * A statistic in at most 8 characters, for the table's narrow columns (`formatStat` says it in full, on hover):
 * 3 significant digits, exponents without "+", counts as 12.3k.
 * @param {string} field
 * @param {number | string | null | undefined} value
 */
export function formatCompact(field, value) {
  if (value === undefined || value === null) return "—";
  if (typeof value === "string") return value;
  if (/(^|_)(nan|inf|nonfinite|numel)$/.test(field)) return formatCount(value);
  if (/(^|_)zero_fraction$/.test(field)) return `${(value * 100).toFixed(value >= 0.9995 || value === 0 ? 0 : 1)}%`;
  if (value === 0) return "0";
  if (Math.abs(value) >= 1e4 || Math.abs(value) < 1e-2) return value.toExponential(2).replace("e+", "e");
  return String(Number(value.toPrecision(3)));
}

/**
 * The table's rows as objects (`{path, act_norm, ...}`) from the wire format: `summary.columns` names
 * the fields and each row of `summary.rows` lists their values in that order (`null`: not recorded).
 * @param {Partial<import("./payloads.js").Summary> | null | undefined} summary
 */
export function rowObjects(summary) {
  const columns = summary?.columns ?? [];
  return (summary?.rows ?? []).map((values) => {
    const row = /** @type {SummaryRow} */ ({});
    columns.forEach((column, i) => {
      // The wire's cells (`Any` in protocol.py): numbers, "nan"/"inf"/"-inf", the layer's path; null when not recorded.
      if (values[i] !== null && values[i] !== undefined) row[column] = /** @type {number | string} */ (values[i]);
    });
    return row;
  });
}

/**
 * A sortable number for a cell: NaN sorts above everything (it is what people look for), missing below.
 * @param {unknown} value
 */
function sortKey(value) {
  if (value === "nan") return Infinity;
  if (value === "inf") return Number.MAX_VALUE;
  if (value === "-inf") return -Number.MAX_VALUE;
  if (typeof value === "number") return value;
  return -Infinity;
}

/**
 * Rows sorted by `field` (`"path"` keeps the given execution order), `descending` or not; a new array.
 * @param {SummaryRow[]} rows
 * @param {string} field
 */
export function sortRows(rows, field, descending = false) {
  const indexed = rows.map((row, i) => /** @type {[SummaryRow, number]} */ ([row, i]));
  if (field === "path") {
    if (descending) indexed.reverse();
    return indexed.map(([row]) => row);
  }
  indexed.sort(([a, i], [b, j]) => {
    const diff = sortKey(a[field]) - sortKey(b[field]);
    if (diff !== 0 && !Number.isNaN(diff)) return descending ? -diff : diff;
    return i - j; // stable: ties keep the execution order
  });
  return indexed.map(([row]) => row);
}

/**
 * A statistic as short text: 4 significant digits, counts as integers, "—" when missing.
 * @param {string} field
 * @param {number | string | null | undefined} value
 */
export function formatStat(field, value) {
  if (value === undefined || value === null) return "—";
  if (typeof value === "string") return value;
  // A field as the summary names it (`act_nan`) or as a run log does (`nan`).
  if (/(^|_)(nan|inf|nonfinite|numel)$/.test(field)) return String(Math.round(value));
  if (/(^|_)zero_fraction$/.test(field)) return `${(value * 100).toFixed(1)}%`;
  if (value !== 0 && (Math.abs(value) >= 1e5 || Math.abs(value) < 1e-3)) return value.toExponential(2);
  return String(Number(value.toPrecision(4)));
}
