/** What the page says of the kernel's state: a running cell, views behind the live step; pure, no DOM. */

import { displayPath } from "./format.js";
import { everyLayerKinds, kindRow } from "./kinds.js";

/** @typedef {Partial<import("./payloads.js").Status> | null | undefined} MaybeStatus */
/** @typedef {import("./kinds.js").KindTable} KindTable */

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
    : "The kernel is busy running a cell: the selection's hooks show when the cell finishes.";
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

/**
 * The kinds "Stats on every layer" attached and still holds, from the `hooks` and `hook_kinds` traitlets.
 * @param {import("./payloads.js").HookItem[] | null | undefined} hooks
 * @param {KindTable} table
 */
export function everyLayerStats(hooks, table) {
  const held = new Set(
    (Array.isArray(hooks) ? hooks : [])
      .filter((hook) => hook && hook.path === "" && !hook.foreign && hook.action === "stats")
      .map((hook) => hook.kind),
  );
  return everyLayerKinds(table).filter((kind) => held.has(kind));
}

/**
 * What the summary says once stats hooks are on every layer and no statistics came yet: of each kind, what it sees.
 * @param {string[]} kinds
 * @param {KindTable} table
 */
export function everyLayerText(kinds, table) {
  if (kinds.length === 0) return "";
  const sides = new Set(kinds.map((kind) => kindRow(table, kind, "global")?.phase));
  const what = [sides.has("forward") ? "output" : "", sides.has("backward") ? "gradient" : ""].filter(Boolean).join(" and ");
  return `Stats attached on every layer's ${what}: Run, or your own training loop, fills this summary.`;
}

/**
 * The status line's `text` (the latest action's message; without one, what the view shows: the selection and the
 * explorer's step) and `title` (the message in full, then the view); one line, cut with "…", the whole in `title`.
 * @param {MaybeStatus} status
 * @param {string} selected
 */
export function statusLine(status, selected) {
  const message = typeof status?.message === "string" ? status.message : "";
  const step = status?.step;
  const at = typeof step === "number" && step > 0 ? ` at step ${step}` : "";
  const view = `viewing ${displayPath(selected)}${at}`;
  return { text: message || view, title: message ? `${message}\n${view}` : view };
}
