/**
 * Module tree panel: a virtualized list (only the rows in view exist in the DOM, so a 10,000-module
 * model opens and scrolls at once), search with highlighted matches, expand/collapse all, hook badges.
 */

import { formatCount } from "../format.js";
import { indexHooks } from "../hooks.js";
import {
  ancestorPaths,
  childrenOf,
  defaultExpanded,
  expandablePaths,
  flattenVisible,
  indexTree,
  isTree,
  scrollToReveal,
  searchTree,
  stepPath,
  visibleWindow,
} from "../tree.js";
import { h, listen, setText, subscribe } from "./dom.js";
import { buildRow, fillBadges } from "./tree_row.js";

export const ROW_HEIGHT = 22; // px; must match `.hw-row` height in widget.css
const SEARCH_DELAY_MS = 120;
const MAX_MATCHES = 5000;

/**
 * Where a tree panel's state lives: the explorer's model (`explorerTree`), or the run view's. `marked` is the row
 * marked as failed (the module a Run failed in; the first non-finite of a run log); `on` subscribes to one part.
 * @typedef {object} TreeSource
 * @property {() => unknown} tree the `tree` traitlet
 * @property {() => string} selected
 * @property {(path: string) => void} select
 * @property {() => import("../payloads.js").HookItem[]} hooks
 * @property {() => import("../kinds.js").KindTable} kinds
 * @property {() => string | null} marked
 * @property {(parts: ("tree" | "hooks" | "selected" | "marked")[], callback: () => void) => () => void} on
 */

/**
 * The explorer's tree: its traitlets `tree`, `selected`, `hooks`, `hook_kinds`, and `status.failed` marked.
 * @param {import("../widget_model.js").WidgetModel} model
 * @returns {TreeSource}
 */
export function explorerTree(model) {
  /** @type {Record<string, import("../widget_model.js").ChangeEvent[]>} */
  const events = {
    tree: ["change:tree"],
    hooks: ["change:hooks", "change:hook_kinds"],
    selected: ["change:selected"],
    marked: ["change:status"],
  };
  return {
    tree: () => model.get("tree"),
    selected: () => {
      const value = model.get("selected");
      return typeof value === "string" ? value : "";
    },
    select: (path) => {
      model.set("selected", path);
      model.save_changes();
    },
    hooks: () => model.get("hooks"),
    kinds: () => model.get("hook_kinds") ?? [],
    marked: () => {
      const failed = model.get("status")?.failed;
      return typeof failed === "string" ? failed : null;
    },
    on: (parts, callback) => {
      const offs = parts.map((part) => subscribe(model, events[part] ?? [], callback));
      return () => offs.forEach((off) => off());
    },
  };
}

/**
 * Build the explorer's tree panel for `model`; returns {el, destroy}.
 * @param {import("../widget_model.js").WidgetModel} model
 */
export function createTreeView(model) {
  return createModuleTree(explorerTree(model));
}

/**
 * Build a tree panel showing `source`; returns {el, destroy}.
 * @param {TreeSource} source
 */
export function createModuleTree(source) {
  const search = h("input", {
    cls: "hw-search",
    attrs: { type: "search", placeholder: "Search modules", "aria-label": "Search modules", spellcheck: "false" },
  });
  const matchInfo = h("span", { cls: "hw-match-count", attrs: { "aria-live": "polite" } });
  const expandAll = h("button", { cls: "hw-expand-all", attrs: { type: "button", title: "Expand all" }, text: "⊞" });
  const collapseAll = h("button", {
    cls: "hw-collapse-all",
    attrs: { type: "button", title: "Collapse all" },
    text: "⊟",
  });
  const toolbar = h("div", { cls: "hw-tree-toolbar" }, [search, matchInfo, expandAll, collapseAll]);
  const sizer = h("div", { cls: "hw-tree-sizer" });
  const viewport = h("div", { cls: "hw-tree", attrs: { role: "tree", "aria-label": "Modules" } }, [sizer]);
  const el = h("div", { cls: "hw-tree-box" }, [toolbar, viewport]);

  /** @type {import("../payloads.js").TreeNode | null} */
  let tree = null;
  /** @type {Map<string, import("../tree.js").Entry>} */
  let index = new Map();
  /** @type {Set<string>} */
  let expanded = new Set();
  /** @type {import("../tree.js").Row[]} */
  let rows = [];
  /** @type {Map<string, number>} */
  let rowIndex = new Map(); // path -> position in rows
  /** @type {import("../hooks.js").HookIndex} */
  let hookIndex = new Map();
  let query = "";
  /** @type {string[]} */
  let matches = [];
  /** @type {Set<string>} */
  let matchSet = new Set();
  let matchCursor = -1;
  /** @type {Map<string, {el: HTMLDivElement, badges: HTMLSpanElement, top: number}>} */
  let drawn = new Map(); // path -> {el, badges} for the rows in the DOM
  /** @type {number | null} */
  let frame = null;
  /** @type {ReturnType<typeof setTimeout> | null} */
  let searchTimer = null;

  const selectedPath = source.selected;

  /** @param {string | null | undefined} path */
  function select(path) {
    if (path === null || path === undefined) return;
    source.select(path);
  }

  /** The row marked as failed (the module the latest Run failed in), or null. */
  const failedPath = source.marked;
  const hookKinds = source.kinds;

  /** Recompute the visible rows (after expansion changes) and redraw the window. */
  function relayout() {
    rows = flattenVisible(tree, expanded);
    rowIndex = new Map(rows.map((row, i) => [row.path, i]));
    sizer.style.height = `${rows.length * ROW_HEIGHT}px`;
    drawWindow(true);
  }

  /** Draw the rows in view; `force` rebuilds rows already drawn (their content changed). */
  function drawWindow(force = false) {
    const active = document.activeElement;
    const focusedPath =
      active && viewport.contains(active) ? active.closest(".hw-row")?.getAttribute("data-path") : null;
    const { start, end } = visibleWindow(viewport.scrollTop, viewport.clientHeight || 440, ROW_HEIGHT, rows.length);
    const selected = selectedPath();
    const next = new Map();
    for (let i = start; i < end; i++) {
      const row = rows[i];
      let entry = force ? undefined : drawn.get(row.path);
      if (entry === undefined || entry.top !== i) {
        const built = buildRow(row, { hookIndex, selected, query, matchSet, kinds: hookKinds(), failedRun: failedPath() });
        built.el.style.top = `${i * ROW_HEIGHT}px`;
        entry = { ...built, top: i };
      }
      next.set(row.path, entry);
    }
    for (const [path, entry] of drawn) if (next.get(path) !== entry) entry.el.remove();
    for (const entry of next.values()) if (!entry.el.isConnected) sizer.append(entry.el);
    drawn = next;
    if (rows.length === 0 && !sizer.querySelector(".hw-empty")) {
      sizer.append(h("div", { cls: "hw-empty", text: "No module tree yet." }));
    } else if (rows.length > 0) {
      sizer.querySelector(".hw-empty")?.remove();
    }
    updateTabStop();
    // Rebuilding drops focus; give it back to the same row so keyboard users keep their place.
    if (focusedPath) drawn.get(focusedPath)?.el.focus({ preventScroll: true });
  }

  function scheduleDraw() {
    if (frame !== null) return;
    frame = requestAnimationFrame(() => {
      frame = null;
      drawWindow();
    });
  }

  /** Keep exactly one drawn row in the tab order: the selected one, else the first drawn. */
  function updateTabStop() {
    const stop = drawn.get(selectedPath()) ?? drawn.values().next().value;
    for (const entry of drawn.values()) entry.el.tabIndex = entry === stop ? 0 : -1;
  }

  /**
   * Scroll so `path` is in view (`center` for jumps from elsewhere), then draw.
   * @param {string} path
   */
  function reveal(path, center = false) {
    const at = rowIndex.get(path);
    if (at === undefined) return;
    const height = viewport.clientHeight || 440;
    if (center) {
      const top = at * ROW_HEIGHT;
      if (top < viewport.scrollTop || top + ROW_HEIGHT > viewport.scrollTop + height) {
        viewport.scrollTop = Math.max(0, top - height / 2 + ROW_HEIGHT / 2);
      }
    } else {
      const top = scrollToReveal(at, viewport.scrollTop, height, ROW_HEIGHT);
      if (top !== null) viewport.scrollTop = top;
    }
    drawWindow();
  }

  /** @param {string[]} paths */
  function openAncestors(paths) {
    let changed = false;
    for (const path of paths) {
      for (const ancestor of ancestorPaths(index, path)) {
        if (!expanded.has(ancestor)) {
          expanded.add(ancestor);
          changed = true;
        }
      }
    }
    return changed;
  }

  function onTree() {
    const next = source.tree();
    const previous = tree;
    tree = isTree(/** @type {import("../tree.js").MaybeTree} */ (next)) ? /** @type {import("../payloads.js").TreeNode} */ (next) : null;
    index = indexTree(tree);
    if (!isTree(previous) || previous.cls !== tree?.cls) {
      expanded = defaultExpanded(tree);
    } else {
      // Same model re-probed: keep what the user opened, drop paths that no longer exist.
      expanded = new Set([...expanded].filter((path) => index.has(path)));
    }
    runSearch();
    relayout();
  }

  function onHooks() {
    hookIndex = indexHooks(source.hooks());
    const options = { hookIndex, kinds: hookKinds() };
    for (const [path, entry] of drawn) entry.el.classList.toggle("hw-row-error", fillBadges(entry.badges, path, options));
  }

  /** @type {string | null} */
  let shownFailed = null; // a row marked from the start (a run log's first NaN/Inf) opens its ancestors too
  function onStatus() {
    // A Run's failure marks its module's row; the mark leaves with the error. Its ancestors open to show it.
    const failed = failedPath();
    if (failed === shownFailed) return;
    shownFailed = failed;
    if (failed !== null && openAncestors([failed])) relayout();
    for (const [path, entry] of drawn) entry.el.classList.toggle("hw-row-failed", path === failed);
  }

  let shownSelected = selectedPath();
  let hiddenReveal = false;
  function onSelected() {
    const selected = selectedPath();
    // A selection made from Python or the graph may sit under a collapsed node: open its ancestors.
    if (openAncestors([selected])) relayout();
    for (const path of [shownSelected, selected]) {
      const entry = drawn.get(path);
      if (!entry) continue;
      entry.el.classList.toggle("hw-selected", path === selected);
      entry.el.setAttribute("aria-selected", String(path === selected));
    }
    shownSelected = selected;
    // In a hidden tab the tree cannot scroll: it reveals the selection when it is shown again.
    hiddenReveal = viewport.clientHeight === 0;
    reveal(selected, !viewport.contains(document.activeElement));
  }

  /**
   * @param {string} path
   * @param {boolean} open
   */
  function setExpanded(path, open) {
    if (open === expanded.has(path)) return;
    if (open) expanded.add(path);
    else expanded.delete(path);
    relayout();
  }

  function runSearch() {
    matches = searchTree(tree, query, MAX_MATCHES);
    matchSet = new Set(matches);
    matchCursor = -1;
    if (query.trim() === "") setText(matchInfo, "");
    else if (matches.length === 0) setText(matchInfo, "no match");
    else {
      const more = matches.length >= MAX_MATCHES ? "+" : "";
      setText(matchInfo, `${formatCount(matches.length)}${more} ${matches.length === 1 ? "match" : "matches"}`);
    }
    openAncestors(matches);
  }

  function onSearchInput() {
    if (searchTimer !== null) clearTimeout(searchTimer);
    searchTimer = setTimeout(() => {
      searchTimer = null;
      query = search.value;
      runSearch();
      relayout();
      if (matches.length > 0) reveal(matches[0], true);
    }, SEARCH_DELAY_MS);
  }

  /** @param {KeyboardEvent} event */
  function onSearchKey(event) {
    if (event.key === "Escape") {
      search.value = "";
      query = "";
      runSearch();
      relayout();
    } else if (event.key === "Enter" && matches.length > 0) {
      // Enter walks through the matches (Shift+Enter backwards) and selects each.
      const step = event.shiftKey ? -1 : 1;
      matchCursor = (matchCursor + step + matches.length) % matches.length;
      select(matches[matchCursor]);
    } else {
      return;
    }
    event.preventDefault();
    event.stopPropagation();
  }

  /** @param {string | null | undefined} path */
  function moveTo(path) {
    if (path === null || path === undefined) return;
    select(path);
    reveal(path);
    drawn.get(path)?.el.focus({ preventScroll: true });
  }

  /** @param {MouseEvent} event */
  function onClick(event) {
    const target = /** @type {Element} */ (event.target);
    const rowEl = target.closest(".hw-row");
    if (!rowEl || !viewport.contains(rowEl)) return;
    const path = /** @type {string} */ (rowEl.getAttribute("data-path"));
    if (target.closest(".hw-caret")) {
      // The caret only opens or closes; selecting is the row's job.
      setExpanded(path, !expanded.has(path));
      drawn.get(path)?.el.focus({ preventScroll: true });
      return;
    }
    select(path);
  }

  /** @param {KeyboardEvent} event */
  function onKeyDown(event) {
    const rowEl = /** @type {Element} */ (event.target).closest(".hw-row");
    if (!rowEl || !viewport.contains(rowEl)) return;
    const path = /** @type {string} */ (rowEl.getAttribute("data-path"));
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
        else if (hasChildren) moveTo(childrenOf(entry?.node)[0].path);
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
    source.on(["tree"], onTree),
    source.on(["hooks"], onHooks),
    source.on(["selected"], onSelected),
    source.on(["marked"], onStatus),
    listen(viewport, "click", onClick),
    listen(viewport, "keydown", onKeyDown),
    listen(viewport, "scroll", scheduleDraw),
    listen(search, "input", onSearchInput),
    listen(search, "keydown", onSearchKey),
    listen(expandAll, "click", () => {
      expanded = expandablePaths(tree);
      relayout();
    }),
    listen(collapseAll, "click", () => {
      expanded = new Set(tree ? [tree.path] : []);
      relayout();
      reveal(selectedPath());
    }),
  ];
  hookIndex = indexHooks(source.hooks());
  onTree();
  onStatus();
  // The viewport has no height until the view is attached to the page: draw again once it has.
  const resize =
    typeof ResizeObserver === "function"
      ? new ResizeObserver(() => {
          if (hiddenReveal && viewport.clientHeight > 0) {
            hiddenReveal = false;
            reveal(selectedPath(), true); // selected from the graph while the tree's tab was closed
          }
          scheduleDraw();
        })
      : null;
  resize?.observe(viewport);
  onSelected();
  return {
    el,
    destroy() {
      offs.forEach((off) => off());
      resize?.disconnect();
      if (frame !== null) cancelAnimationFrame(frame);
      if (searchTimer !== null) clearTimeout(searchTimer);
    },
  };
}
