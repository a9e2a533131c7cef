/** What the page says of the kernel's state: a running cell, views behind the live step; pure, no DOM. */

/** @typedef {Partial<import("./payloads.js").Status> | null | undefined} MaybeStatus */

/**
 * Whether the kernel is running a notebook cell (the status's `cell`): the page's messages wait for its end.
 * @param {MaybeStatus} status
 */
export function cellRunning(status) {
  return Boolean(status && status.cell === true);
}

/**
 * The inspector's line while a cell runs (null when none does): `answered` is whether the selection's payload came.
 * @param {MaybeStatus} status
 * @param {boolean} answered
 */
export function busyText(status, answered) {
  if (!cellRunning(status)) return null;
  return answered
    ? "The kernel is busy running a cell: what you change here applies when the cell finishes."
    : "The kernel is busy running a cell: this target's hooks show when the cell finishes.";
}

/**
 * "step 208 of 239, updating…" when a view drawn at step `shown` lags the explorer's live step while a cell runs;
 * "" otherwise (no step shown, up to date, or an older step the user picked once the cell ended).
 * @param {number | null} shown
 * @param {MaybeStatus} status
 */
export function lagText(shown, status) {
  const live = status?.step;
  if (typeof shown !== "number" || typeof live !== "number") return "";
  if (!Number.isInteger(shown) || !Number.isInteger(live) || !cellRunning(status) || live <= shown) return "";
  return `step ${shown} of ${live}, updating…`;
}

const EVERY_LAYER = ["global_forward", "global_grad"];

/**
 * The kinds "Stats on every layer" attached and still holds, from the `hooks` traitlet.
 * @param {import("./payloads.js").HookItem[] | null | undefined} hooks
 */
export function everyLayerStats(hooks) {
  const held = new Set(
    (Array.isArray(hooks) ? hooks : [])
      .filter((hook) => hook && hook.target === "" && !hook.foreign && hook.action === "stats")
      .map((hook) => hook.kind),
  );
  return EVERY_LAYER.filter((kind) => held.has(kind));
}

/**
 * What the summary says once stats hooks are on every layer and no statistics came yet.
 * @param {string[]} kinds
 */
export function everyLayerText(kinds) {
  if (kinds.length === 0) return "";
  const what = kinds.length === 2 ? "output and gradient" : kinds[0] === "global_grad" ? "gradient" : "output";
  return `Stats attached on every layer's ${what}: Run, or your own training loop, fills this summary.`;
}
