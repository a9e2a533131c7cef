/** Lookups over the `hooks` traitlet; pure, no DOM. */

import { formatFired } from "./format.js";
import { kindRow } from "./kinds.js";

/** @typedef {import("./payloads.js").HookItem} HookItem */
/** Hooks by path. @typedef {Map<string, HookItem[]>} HookIndex */

/**
 * Group live hooks by path, keeping their order: Map<path, hook[]>.
 * @param {HookItem[] | null | undefined} hooks
 */
export function indexHooks(hooks) {
  /** @type {HookIndex} */
  const byPath = new Map();
  if (!Array.isArray(hooks)) return byPath;
  for (const hook of hooks) {
    if (!hook || typeof hook.path !== "string") continue;
    const list = byPath.get(hook.path);
    if (list) list.push(hook);
    else byPath.set(hook.path, [hook]);
  }
  return byPath;
}

/**
 * The hooks attached to `path` (an empty list when none).
 * @param {HookIndex} index
 * @param {string} path
 */
export function hooksAt(index, path) {
  return index.get(path) ?? [];
}

/**
 * Whether the explorer attached a hook of `kind` to `path` (hooks others attached do not count).
 * @param {HookIndex} index
 * @param {string} path
 * @param {string | null} kind
 */
export function hasHook(index, path, kind) {
  return hooksAt(index, path).some((hook) => hook.kind === kind && !hook.foreign);
}

/**
 * What a hook's badge counts and says: a global kind fires on every module of a step, so it counts the steps it
 * fired in (its firings, summed over modules, are in the text); another kind counts its firings.
 * @param {import("./kinds.js").KindTable} kinds
 * @param {HookItem} hook
 * @returns {{count: number, text: string}}
 */
export function badgeCount(kinds, hook) {
  if (kindRow(kinds, hook.kind, "global")?.family !== "global") return { count: hook.fired, text: formatFired(hook.fired) };
  const steps = hook.steps ?? 0;
  if (steps === 0) return { count: 0, text: formatFired(hook.fired) };
  const perStep = hook.fired / steps;
  const modules = Number.isInteger(perStep) ? String(perStep) : `~${Math.round(perStep)}`;
  return {
    count: steps,
    text: `fired in ${steps} ${steps === 1 ? "step" : "steps"}, on ${modules} modules a step (${hook.fired} times in all)`,
  };
}

/**
 * What the run bar says of the edits attached (the hooks' `edit_label`s, as `Explorer.edits` names them, in
 * attach order): `text` "running with 2 edits: …" and `title` one per line; both "" when no edit is attached.
 * @param {HookItem[] | null | undefined} hooks
 */
export function runEdits(hooks) {
  const labels = (Array.isArray(hooks) ? hooks : []).filter((hook) => hook && !hook.foreign && hook.edit_label).map((hook) => hook.edit_label);
  if (labels.length === 0) return { text: "", title: "" };
  const head = `running with ${labels.length} ${labels.length === 1 ? "edit" : "edits"}`;
  return { text: `${head}: ${labels.join("; ")}`, title: `Run and the panels' analyses ${head}:\n${labels.join("\n")}` };
}
