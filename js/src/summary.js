/** The summary table's rows: sorting and number formatting; pure, no DOM. */

/** Columns of the table: field and header, in display order. */
export const COLUMNS = [
  ["target", "layer"],
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
 * The table's rows as objects (`{target, act_norm, ...}`) from the wire format: `summary.columns` names
 * the fields and each row of `summary.rows` lists their values in that order (`null`: not recorded).
 */
export function rowObjects(summary) {
  const columns = summary?.columns ?? [];
  return (summary?.rows ?? []).map((values) => {
    const row = {};
    columns.forEach((column, i) => {
      if (values[i] !== null && values[i] !== undefined) row[column] = values[i];
    });
    return row;
  });
}

/** A sortable number for a cell: NaN sorts above everything (it is what people look for), missing below. */
function sortKey(value) {
  if (value === "nan") return Infinity;
  if (value === "inf") return Number.MAX_VALUE;
  if (value === "-inf") return -Number.MAX_VALUE;
  if (typeof value === "number") return value;
  return -Infinity;
}

/** Rows sorted by `field` (`"target"` keeps the given execution order), `descending` or not; a new array. */
export function sortRows(rows, field, descending = false) {
  const indexed = rows.map((row, i) => [row, i]);
  if (field === "target") {
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

/** A statistic as short text: 4 significant digits, counts as integers, "—" when missing. */
export function formatStat(field, value) {
  if (value === undefined || value === null) return "—";
  if (typeof value === "string") return value;
  if (field.endsWith("_nan") || field.endsWith("_inf")) return String(Math.round(value));
  if (field.endsWith("_zero_fraction")) return `${(value * 100).toFixed(1)}%`;
  if (value !== 0 && (Math.abs(value) >= 1e5 || Math.abs(value) < 1e-3)) return value.toExponential(2);
  return String(Number(value.toPrecision(4)));
}
