/** The summary table's rows: sorting and number formatting; pure, no DOM. */

/**
 * A row of the table: the layer's `path`, each recorded field's value (a number, or "nan"/"inf"/"-inf").
 * @typedef {{path: string} & Record<string, number | string>} SummaryRow
 */

/**
 * Columns of the table: field and header, in display order.
 * @type {[string, string][]}
 */
export const COLUMNS = [
  ["path", "layer"],
  ["act_norm", "act ‖·‖"],
  ["act_mean", "act mean"],
  ["act_zero_fraction", "act zeros"],
  ["act_nan", "act NaN"],
  ["act_inf", "act Inf"],
  ["grad_norm", "grad ‖·‖"],
  ["grad_zero_fraction", "grad zeros"],
  ["grad_nan", "grad NaN"],
  ["grad_inf", "grad Inf"],
];

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
