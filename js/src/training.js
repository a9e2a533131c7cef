/** The training panel's tables: update-ratio columns, sorting, flags and number formats; pure, no DOM. */

/** @typedef {import("./payloads.js").RatioRow} RatioRow */

/**
 * Columns of the update-ratio table: field and header, in display order (`optimizer` only with several).
 * @type {[keyof RatioRow, string][]}
 */
export const RATIO_COLUMNS = [
  ["param", "parameter"],
  ["optimizer", "optimizer"],
  ["ratio", "‖Δw‖/‖w‖"],
  ["update_norm", "‖Δw‖"],
  ["weight_norm", "‖w‖"],
  ["lr", "lr"],
  ["flag", "check"],
];

/** @type {Record<string, number>} */
const FLAG_RANK = { nonfinite: 4, high: 3, low: 2, undefined: 1, "": 0 };

/**
 * A number to sort a cell by: "nan" above everything (it is what people look for), missing below.
 * @param {unknown} value
 */
function numberKey(value) {
  if (value === "nan") return Infinity;
  if (value === "inf") return Number.MAX_VALUE;
  if (value === "-inf") return -Number.MAX_VALUE;
  if (typeof value === "number") return value;
  return -Infinity;
}

/**
 * Rows sorted by `field`, `descending` or not; a new array. `param` keeps the given (model) order,
 * `optimizer` sorts by name, `flag` puts "nonfinite", "high", "low", then "undefined" first when descending.
 * @param {RatioRow[]} rows
 * @param {string} field
 */
export function sortRatioRows(rows, field, descending = false) {
  const indexed = rows.map((row, i) => /** @type {[RatioRow, number]} */ ([row, i]));
  if (field === "param") {
    if (descending) indexed.reverse();
    return indexed.map(([row]) => row);
  }
  /** @type {(row: RatioRow) => number | string} */
  const key =
    field === "flag"
      ? (row) => FLAG_RANK[row.flag] ?? 0
      : field === "optimizer"
        ? (row) => String(row.optimizer ?? "")
        : (row) => numberKey(/** @type {Record<string, unknown>} */ (row)[field]);
  indexed.sort(([a, i], [b, j]) => {
    const ka = key(a);
    const kb = key(b);
    const diff = typeof ka === "string" ? ka.localeCompare(String(kb)) : ka - Number(kb);
    if (diff !== 0 && !Number.isNaN(diff)) return descending ? -diff : diff;
    return i - j; // stable: ties keep the model's order
  });
  return indexed.map(([row]) => row);
}

/**
 * A ratio or norm as short text: 3 significant digits, exponent form when tiny or huge, "—" when missing.
 * @param {number | string | null | undefined} value
 */
export function formatRatio(value) {
  if (value === undefined || value === null) return "—";
  if (typeof value === "string") return value;
  if (value === 0) return "0";
  if (Math.abs(value) >= 1e4 || Math.abs(value) < 1e-2) return value.toExponential(2);
  return String(Number(value.toPrecision(3)));
}

/**
 * What the check column says about a flag: why the ratio is worth a look.
 * @param {string} flag
 */
export function flagText(flag, low = 1e-5, high = 1e-1) {
  if (flag === "high") return `▲ above ${high.toExponential(0)}`;
  if (flag === "low") return `▼ below ${low.toExponential(0)}`;
  if (flag === "nonfinite") return "✖ NaN/Inf in the update or the weight";
  if (flag === "undefined") return "no ratio: ‖w‖ = 0";
  return "ok";
}
