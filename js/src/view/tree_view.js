/** Module tree panel: collapsible rows with shape, parameters and hook badges; keyboard navigable. */

import { badgeLabel, formatFired, formatParams, formatShape } from "../format.js";
import { hooksAt, indexHooks } from "../hooks.js";
import {
  ancestorPaths,
  childrenOf,
  defaultExpanded,
  flattenVisible,
  indexTree,
  isTree,
  stepPath,
} from "../tree.js";
import { h, listen, subscribe } from "./dom.js";

/** Build the tree panel for `model`; returns {el, destroy}. */
export function createTreeView(model) {
  const el = h("div", { cls: "hw-tree", attrs: { role: "tree", "aria-label": "Modules" } });
  let tree = null;
  let index = new Map();
  let expanded = new Set();
  let rows = [];
  const rowEls = new Map();

  function selectedPath() {
    const value = model.get("selected");
    return typeof value === "string" ? value : "";
  }

  function select(path) {
    if (path === null || path === undefined) return;
    model.set("selected", path);
    model.save_changes();
  }

  function orderedHooks(path, hookIndex) {
    // Badges follow the inspector's toggle order so they do not jump around as hooks change.
    const order = model.get("hook_kinds") ?? [];
    const rank = (kind) => {
      const i = order.indexOf(kind);
      return i < 0 ? order.length : i;
    };
    return [...hooksAt(hookIndex, path)].sort((a, b) => rank(a.kind) - rank(b.kind));
  }

  function fillBadges(container, path, hookIndex) {
    const badges = orderedHooks(path, hookIndex).map((hook) =>
      h("span", {
        cls: hook.error ? "hw-badge hw-badge-error" : "hw-badge",
        attrs: {
          "data-kind": hook.kind,
          title: `${hook.kind}: ${formatFired(hook.fired)}${hook.error ? " (error)" : ""}`,
        },
        text: badgeLabel(hook.kind),
      }),
    );
    container.replaceChildren(...badges);
  }

  function buildRow(row, hookIndex, selected) {
    const { node, path, depth, hasChildren } = row;
    const caret = hasChildren
      ? h("span", { cls: "hw-caret", attrs: { "aria-hidden": "true" }, text: row.expanded ? "▾" : "▸" })
      : h("span", { cls: "hw-caret-spacer", attrs: { "aria-hidden": "true" } });
    const label = h("span", { cls: "hw-label", attrs: { title: path === "" ? node.cls : path } }, [
      h("span", { cls: "hw-name", text: node.name || node.cls || path }),
      path === "" ? null : h("span", { cls: "hw-cls", text: node.cls ?? "" }),
    ]);
    const trainable = node.trainable ?? 0;
    const frozen = node.frozen ?? 0;
    const badges = h("span", { cls: "hw-badges" });
    fillBadges(badges, path, hookIndex);
    const el = h(
      "div",
      {
        cls: path === selected ? "hw-row hw-selected" : "hw-row",
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
          cls: trainable + frozen === 0 ? "hw-params hw-zero" : "hw-params",
          attrs: { title: `${trainable} trainable, ${frozen} frozen parameters` },
          text: formatParams(trainable, frozen),
        }),
        badges,
      ],
    );
    el.style.setProperty("--hw-depth", String(depth));
    return { el, badges };
  }

  /** Keep exactly one row in the tab order: the selected one, else the first. */
  function updateTabStop() {
    const stop = rowEls.get(selectedPath()) ?? rowEls.values().next().value;
    for (const { el: rowEl } of rowEls.values()) rowEl.tabIndex = rowEl === stop?.el ? 0 : -1;
  }

  function rebuildRows() {
    const focused = el.contains(document.activeElement)
      ? document.activeElement.closest(".hw-row")?.getAttribute("data-path")
      : undefined;
    const hookIndex = indexHooks(model.get("hooks"));
    const selected = selectedPath();
    rows = flattenVisible(tree, expanded);
    rowEls.clear();
    const fragment = document.createDocumentFragment();
    for (const row of rows) {
      const built = buildRow(row, hookIndex, selected);
      rowEls.set(row.path, built);
      fragment.append(built.el);
    }
    if (rows.length === 0) fragment.append(h("div", { cls: "hw-empty", text: "No module tree yet." }));
    el.replaceChildren(fragment);
    updateTabStop();
    // Rebuilding drops focus; give it back to the same row so keyboard users keep their place.
    if (focused !== undefined && focused !== null) rowEls.get(focused)?.el.focus();
  }

  function onTree() {
    const next = model.get("tree");
    const previous = tree;
    tree = isTree(next) ? next : null;
    index = indexTree(tree);
    if (!isTree(previous) || previous.cls !== tree?.cls) {
      expanded = defaultExpanded(tree);
    } else {
      // Same model re-probed: keep what the user opened, drop paths that no longer exist.
      expanded = new Set([...expanded].filter((path) => index.has(path)));
    }
    rebuildRows();
  }

  function onHooks() {
    const hookIndex = indexHooks(model.get("hooks"));
    for (const [path, { badges }] of rowEls) fillBadges(badges, path, hookIndex);
  }

  let shownSelected = selectedPath();
  function onSelected() {
    const selected = selectedPath();
    // A selection made from Python may sit under a collapsed node: open its ancestors.
    const hidden = ancestorPaths(index, selected).filter((path) => !expanded.has(path));
    if (hidden.length > 0) {
      for (const path of hidden) expanded.add(path);
      shownSelected = selected;
      rebuildRows();
      return;
    }
    for (const path of [shownSelected, selected]) {
      const entry = rowEls.get(path);
      if (!entry) continue;
      entry.el.classList.toggle("hw-selected", path === selected);
      entry.el.setAttribute("aria-selected", String(path === selected));
    }
    shownSelected = selected;
    updateTabStop();
  }

  function setExpanded(path, open) {
    if (open === expanded.has(path)) return;
    if (open) expanded.add(path);
    else expanded.delete(path);
    rebuildRows();
  }

  function moveTo(path) {
    if (path === null || path === undefined) return;
    select(path);
    rowEls.get(path)?.el.focus();
  }

  function onClick(event) {
    const rowEl = event.target.closest(".hw-row");
    if (!rowEl || !el.contains(rowEl)) return;
    const path = rowEl.getAttribute("data-path");
    if (event.target.closest(".hw-caret")) {
      // The caret only opens or closes; selecting is the row's job.
      setExpanded(path, !expanded.has(path));
      rowEls.get(path)?.el.focus();
      return;
    }
    select(path);
  }

  function onKeyDown(event) {
    const rowEl = event.target.closest(".hw-row");
    if (!rowEl || !el.contains(rowEl)) return;
    const path = rowEl.getAttribute("data-path");
    const entry = index.get(path);
    const hasChildren = entry ? childrenOf(entry.node).length > 0 : false;
    switch (event.key) {
      case "Enter":
      case " ":
        select(path);
        break;
      case "ArrowDown":
        moveTo(stepPath(rows, path, 1));
        break;
      case "ArrowUp":
        moveTo(stepPath(rows, path, -1));
        break;
      case "Home":
        moveTo(rows[0]?.path);
        break;
      case "End":
        moveTo(rows[rows.length - 1]?.path);
        break;
      case "ArrowRight":
        if (hasChildren && !expanded.has(path)) setExpanded(path, true);
        else if (hasChildren) moveTo(childrenOf(entry.node)[0].path);
        break;
      case "ArrowLeft":
        if (hasChildren && expanded.has(path)) setExpanded(path, false);
        else if (entry && entry.parent !== null) moveTo(entry.parent);
        break;
      default:
        return;
    }
    // Keys handled here must not scroll the notebook or reach Jupyter's own shortcuts.
    event.preventDefault();
    event.stopPropagation();
  }

  const offs = [
    subscribe(model, ["change:tree"], onTree),
    subscribe(model, ["change:hooks", "change:hook_kinds"], onHooks),
    subscribe(model, ["change:selected"], onSelected),
    listen(el, "click", onClick),
    listen(el, "keydown", onKeyDown),
  ];
  onTree();
  onSelected();
  return { el, destroy: () => offs.forEach((off) => off()) };
}
