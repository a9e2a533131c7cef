/** One row of the module tree: caret, highlighted name, class, shape, parameters, hook badges. */

import { displayName, formatCount, formatParams, formatShape } from "../format.js";
import { badgeCount, hooksAt } from "../hooks.js";
import { badgeLabel, kindOrder, kindTitle } from "../kinds.js";
import { highlightParts } from "../tree.js";
import { h, textNode } from "./dom.js";

/**
 * What the badges are drawn from: the hooks by path, and the kinds in toggle order.
 * @typedef {{hookIndex: import("../hooks.js").HookIndex, kinds: import("../kinds.js").KindTable}} BadgeContext
 */

/**
 * Text with every occurrence of `query` wrapped in <mark>; built from text nodes, never markup.
 * @param {string} cls
 * @param {string} text
 * @param {string} query
 */
function highlighted(cls, text, query) {
  const parts = highlightParts(text, query).map((part) =>
    part.match ? h("mark", { cls: "hw-mark", text: part.text }) : textNode(part.text),
  );
  return h("span", { cls }, parts);
}

/**
 * Fill `container` with a badge per hook on `path` (the explorer's in the order of `kinds`, the `hook_kinds`
 * traitlet, fired counts inside, then one for hooks others attached); returns whether any hook has an error.
 * @param {HTMLElement} container
 * @param {string} path
 * @param {BadgeContext} context
 */
export function fillBadges(container, path, { hookIndex, kinds }) {
  const order = kindOrder(kinds);
  /** @param {string} kind */
  const rank = (kind) => {
    const i = order.indexOf(kind);
    return i < 0 ? order.length : i;
  };
  const hooks = hooksAt(hookIndex, path);
  const own = hooks.filter((hook) => !hook.foreign).sort((a, b) => rank(a.kind) - rank(b.kind));
  const foreign = hooks.filter((hook) => hook.foreign);
  const badges = own.map((hook) => {
    const { count, text } = badgeCount(kinds, hook); // a global kind counts steps, not firings summed over modules
    const edit = hook.edit_label ? `\nedit: ${hook.edit_label}` : "";
    const cls = ["hw-badge", hook.edit_label ? "hw-badge-edit" : "", hook.error ? "hw-badge-error" : ""];
    return h(
      "span",
      {
        cls: cls.filter(Boolean).join(" "),
        attrs: {
          "data-kind": hook.kind,
          title: `${kindTitle(kinds, hook.kind)}${edit}\n${displayName(hook.action ?? "capture")}: ${text}${hook.error ? " (failed)" : ""}`,
        },
      },
      [
        h("span", { text: `${hook.edit_label ? "✎ " : ""}${badgeLabel(kinds, hook.kind)}` }),
        count > 0 ? h("span", { cls: "hw-badge-count", text: formatCount(count) }) : null,
      ],
    );
  });
  if (foreign.length > 0) {
    const names = foreign.map((hook) => `${hook.kind}: ${displayName(hook.action ?? "?")}`).join("\n");
    badges.push(
      h("span", {
        cls: "hw-badge hw-badge-foreign",
        attrs: { title: `Hooks others attached (left alone):\n${names}` },
        text: `ext ${foreign.length}`,
      }),
    );
  }
  const failed = own.some((hook) => hook.error);
  if (failed) {
    const first = /** @type {import("../payloads.js").HookItem} */ (own.find((hook) => hook.error));
    const line = String(first.error).trim().split("\n").pop();
    badges.unshift(h("span", { cls: "hw-error-marker", attrs: { title: `${first.kind} failed: ${line}` }, text: "⚠" }));
  }
  container.classList.toggle("hw-has-error", failed);
  container.replaceChildren(...badges);
  return failed;
}

/**
 * The parameter counts' tooltip; a null count is a lazy module's, unknown until the model's first forward.
 * @param {number | null} trainable
 * @param {number | null} frozen
 * @param {number} packed
 */
function paramsTitle(trainable, frozen, packed) {
  if (trainable === null || frozen === null) {
    return "parameters of lazy modules are not materialized yet: their counts come with the model's first forward";
  }
  const inPacks = packed > 0 ? ` (${packed} of them packed weights of quantized modules, not parameters)` : "";
  return `${trainable ?? 0} trainable, ${frozen ?? 0} frozen parameters${inPacks}`;
}

/**
 * A count of nothing: 0, or absent; null is unknown, not zero.
 * @param {number | null | undefined} count
 */
function isZero(count) {
  return count === 0 || count === undefined;
}

/**
 * Build the element of one visible row; returns {el, badges}.
 * @param {import("../tree.js").Row} row
 * @param {BadgeContext & {selected: string, query: string, matchSet: Set<string>, failedRun?: string | null}} context
 */
export function buildRow(row, { hookIndex, selected, query, matchSet, kinds, failedRun = null }) {
  const { node, path, depth, hasChildren } = row;
  const caret = hasChildren
    ? h("span", { cls: "hw-caret", attrs: { "aria-hidden": "true" }, text: row.expanded ? "▾" : "▸" })
    : h("span", { cls: "hw-caret-spacer", attrs: { "aria-hidden": "true" } });
  const isMatch = matchSet.has(path);
  // Names as shown (cut, invisible characters escaped); the row's data-path keeps the real path.
  const label = h("span", { cls: "hw-label", attrs: { title: displayName(path === "" ? (node.cls ?? "") : path) } }, [
    highlighted("hw-name", displayName(node.name || node.cls || path), isMatch ? query : ""),
    path === "" ? null : highlighted("hw-cls", displayName(node.cls ?? ""), isMatch ? query : ""),
  ]);
  const { trainable, frozen, packed } = node; // null: lazy parameters not materialized yet
  const badges = h("span", { cls: "hw-badges" });
  const failed = fillBadges(badges, path, { hookIndex, kinds });
  const classes = ["hw-row"];
  if (path === selected) classes.push("hw-selected");
  if (isMatch) classes.push("hw-match");
  if (path === failedRun) classes.push("hw-row-failed"); // the module the latest Run failed in
  if (failed) classes.push("hw-row-error");
  const el = h(
    "div",
    {
      cls: classes.join(" "),
      attrs: {
        "data-path": path,
        role: "treeitem",
        "aria-level": depth + 1,
        "aria-expanded": hasChildren ? String(row.expanded) : null,
        "aria-selected": String(path === selected),
        tabindex: "-1",
      },
    },
    [
      caret,
      label,
      h("span", { cls: "hw-shape", text: formatShape(node.shape) }),
      h("span", {
        cls: isZero(trainable) && isZero(frozen) ? "hw-params hw-zero" : "hw-params",
        attrs: { title: paramsTitle(trainable, frozen, packed) },
        text: formatParams(trainable, frozen, packed),
      }),
      badges,
    ],
  );
  el.style.setProperty("--hw-depth", String(depth));
  return { el, badges };
}
