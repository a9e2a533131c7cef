/** Lookups over the `hooks` traitlet; pure, no DOM. */

/** Group live hooks by target path, keeping their order: Map<path, hook[]>. */
export function indexHooks(hooks) {
  const byPath = new Map();
  if (!Array.isArray(hooks)) return byPath;
  for (const hook of hooks) {
    if (!hook || typeof hook.target !== "string") continue;
    const list = byPath.get(hook.target);
    if (list) list.push(hook);
    else byPath.set(hook.target, [hook]);
  }
  return byPath;
}

/** The hooks attached to `path` (an empty list when none). */
export function hooksAt(index, path) {
  return index.get(path) ?? [];
}

/** Whether the explorer attached a hook of `kind` to `path` (hooks others attached do not count). */
export function hasHook(index, path, kind) {
  return hooksAt(index, path).some((hook) => hook.kind === kind && !hook.foreign);
}
