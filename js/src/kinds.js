/**
 * What the page knows of each hook kind, read from the `hook_kinds` traitlet: Python's kind table, one row a kind
 * (`{kind, name, family, phase, tip, badge, every_layer}`, docs/widget-protocol.md); pure, no DOM.
 */

/** @typedef {import("./payloads.js").HookKind} HookKind */
/** @typedef {HookKind[] | null | undefined} KindTable the `hook_kinds` traitlet, or nothing yet */

/**
 * The rows of a `hook_kinds` value; none for anything else.
 * @param {unknown} table
 * @returns {HookKind[]}
 */
function rowsOf(table) {
  return Array.isArray(table) ? table.filter((row) => row && typeof row === "object" && typeof row.kind === "string") : [];
}

/**
 * The row of a hook of `kind` at a path of `family`: the one of that family (a parameter's "grad" is not a module's),
 * else the first of that name (a global kind on the model, whose selection is a module), else the engine's name.
 */
/**
 * @param {KindTable} table
 * @param {string} kind
 * @param {string} [family]
 * @returns {HookKind | null}
 */
export function kindRow(table, kind, family = "module") {
  const rows = rowsOf(table);
  return (
    rows.find((row) => row.kind === kind && row.family === family) ??
    rows.find((row) => row.kind === kind) ??
    rows.find((row) => row.name === kind) ??
    null
  );
}

/**
 * Every kind's name as users attach it, each once, in display order: badges keep this order.
 * @param {KindTable} table
 */
export function kindOrder(table) {
  return [...new Set(rowsOf(table).map((row) => row.kind))];
}

/**
 * What a hook of `kind` captures and when it fires; "" for a kind the table does not have.
 * @param {KindTable} table
 * @param {string} kind
 * @param {string} [family]
 */
export function kindTip(table, kind, family = "module") {
  const tip = kindRow(table, kind, family)?.tip;
  return typeof tip === "string" ? tip : "";
}

/**
 * The tooltip of a toggle or badge: the kind, then what it captures and when.
 * @param {KindTable} table
 * @param {string} kind
 * @param {string} [family]
 */
export function kindTitle(table, kind, family = "module") {
  const tip = kindTip(table, kind, family);
  return tip ? `${kind}: ${tip}` : kind;
}

/**
 * Short badge text for a hook kind (forward_pre -> "pre", forward -> "fwd"); the kind itself when the table says none.
 * @param {KindTable} table
 * @param {string} kind
 */
export function badgeLabel(table, kind) {
  const badge = kindRow(table, kind)?.badge;
  return typeof badge === "string" && badge ? badge : String(kind);
}

/**
 * The kinds "Stats on every layer" attaches on the model, in display order.
 * @param {KindTable} table
 */
export function everyLayerKinds(table) {
  return rowsOf(table)
    .filter((row) => row.every_layer === true)
    .map((row) => row.kind);
}

/**
 * The selection's kinds split for the inspector: the common ones first (`forward`, `grad`), then the rest ("More
 * kinds"), each in the selection's order. With no common kind, or no other, every kind is in `common` (one group).
 * @param {KindTable} table
 * @param {string[]} kinds
 * @param {string} [family]
 * @returns {{common: string[], more: string[]}}
 */
export function groupKinds(table, kinds, family = "module") {
  const common = kinds.filter((kind) => kindRow(table, kind, family)?.common === true);
  const more = kinds.filter((kind) => !common.includes(kind));
  return common.length === 0 || more.length === 0 ? { common: [...kinds], more: [] } : { common, more };
}
