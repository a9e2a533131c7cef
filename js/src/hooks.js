/** Lookups over the `hooks` traitlet; pure, no DOM. */

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
