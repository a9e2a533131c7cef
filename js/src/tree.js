/** Module tree lookups, visible rows and keyboard navigation; pure, no DOM. */

/** @typedef {import("./payloads.js").TreeNode} TreeNode */
/**
 * The `tree` traitlet (`{}` before Python fills it), or no tree.
 * @typedef {Partial<TreeNode> | null | undefined} MaybeTree
 */
/**
 * A row of the tree panel.
 * @typedef {{node: TreeNode, path: string, depth: number, hasChildren: boolean, expanded: boolean}} Row
 */
/**
 * Where a node sits: `parent` is a path, or null for the root.
 * @typedef {{node: TreeNode, depth: number, parent: string | null}} Entry
 */

/**
 * Whether `tree` is a usable root node (the traitlet is `{}` before Python fills it).
 * @param {MaybeTree} tree
 * @returns {tree is TreeNode}
 */
export function isTree(tree) {
  return tree != null && typeof tree === "object" && typeof tree.path === "string";
}

/**
 * Children of a node, tolerating a missing list.
 * @param {MaybeTree} node
 * @returns {TreeNode[]}
 */
export function childrenOf(node) {
  return Array.isArray(node?.children) ? node.children : [];
}

/**
 * Visit every node depth-first, parents before children: visit(node, depth, parent).
 * @param {MaybeTree} tree
 * @param {(node: TreeNode, depth: number, parent: TreeNode | null) => void} visit
 */
export function walk(tree, visit) {
  if (!isTree(tree)) return;
  // Iterative so a very deep model cannot overflow the stack.
  /** @type {[TreeNode, number, TreeNode | null][]} */
  const stack = [[tree, 0, null]];
  while (stack.length > 0) {
    const [node, depth, parent] = /** @type {[TreeNode, number, TreeNode | null]} */ (stack.pop());
    visit(node, depth, parent);
    const children = childrenOf(node);
    for (let i = children.length - 1; i >= 0; i--) stack.push([children[i], depth + 1, node]);
  }
}

/**
 * Number of modules in the tree, the root included (like `len(list(model.modules()))`).
 * @param {MaybeTree} tree
 */
export function countModules(tree) {
  let count = 0;
  walk(tree, () => {
    count += 1;
  });
  return count;
}

/**
 * Map<path, {node, depth, parent}> for constant-time lookups; parent is a path or null.
 * @param {MaybeTree} tree
 */
export function indexTree(tree) {
  /** @type {Map<string, Entry>} */
  const index = new Map();
  walk(tree, (node, depth, parent) => {
    index.set(node.path, { node, depth, parent: parent ? parent.path : null });
  });
  return index;
}

/**
 * The node at `path`, or null.
 * @param {MaybeTree} tree
 * @param {string} path
 * @returns {TreeNode | null}
 */
export function findNode(tree, path) {
  /** @type {TreeNode | null} */
  let found = null;
  walk(tree, (node) => {
    if (found === null && node.path === path) found = node;
  });
  return found;
}

/**
 * Paths of the ancestors of `path`, root first; empty when `path` is the root or unknown.
 * @param {Map<string, Entry>} index
 * @param {string} path
 */
export function ancestorPaths(index, path) {
  const out = [];
  let entry = index.get(path);
  while (entry && entry.parent !== null) {
    out.unshift(entry.parent);
    entry = index.get(entry.parent);
  }
  return out;
}

/**
 * Paths expanded at first sight: nodes with children above `maxDepth` (root and its children).
 * @param {MaybeTree} tree
 */
export function defaultExpanded(tree, maxDepth = 2) {
  /** @type {Set<string>} */
  const expanded = new Set();
  walk(tree, (node, depth) => {
    if (depth < maxDepth && childrenOf(node).length > 0) expanded.add(node.path);
  });
  return expanded;
}

/**
 * Rows to show, in order: [{node, path, depth, hasChildren, expanded}], children of collapsed nodes skipped.
 * @param {MaybeTree} tree
 * @param {Set<string>} expanded
 */
export function flattenVisible(tree, expanded) {
  /** @type {Row[]} */
  const rows = [];
  if (!isTree(tree)) return rows;
  /** @type {[TreeNode, number][]} */
  const stack = [[tree, 0]];
  while (stack.length > 0) {
    const [node, depth] = /** @type {[TreeNode, number]} */ (stack.pop());
    const children = childrenOf(node);
    const isOpen = children.length > 0 && expanded.has(node.path);
    rows.push({ node, path: node.path, depth, hasChildren: children.length > 0, expanded: isOpen });
    if (isOpen) for (let i = children.length - 1; i >= 0; i--) stack.push([children[i], depth + 1]);
  }
  return rows;
}

/**
 * Path of the visible row `delta` rows away from `path`, clamped to the ends; the first row
 * when `path` is not visible; null when there are no rows.
 * @param {Row[]} rows
 * @param {string} path
 * @param {number} delta
 */
export function stepPath(rows, path, delta) {
  if (rows.length === 0) return null;
  const at = rows.findIndex((row) => row.path === path);
  if (at < 0) return rows[0].path;
  const next = Math.min(rows.length - 1, Math.max(0, at + delta));
  return rows[next].path;
}

/**
 * Next visible path below `path` (stays on the last row).
 * @param {Row[]} rows
 * @param {string} path
 */
export function nextPath(rows, path) {
  return stepPath(rows, path, 1);
}

/**
 * Previous visible path above `path` (stays on the first row).
 * @param {Row[]} rows
 * @param {string} path
 */
export function previousPath(rows, path) {
  return stepPath(rows, path, -1);
}

/**
 * Every path that has children: what "expand all" opens.
 * @param {MaybeTree} tree
 */
export function expandablePaths(tree) {
  /** @type {Set<string>} */
  const paths = new Set();
  walk(tree, (node) => {
    if (childrenOf(node).length > 0) paths.add(node.path);
  });
  return paths;
}

/**
 * Paths whose name, class or path contains `query` (case-insensitive), in tree order; at most
 * `limit` of them. An empty query matches nothing.
 * @param {MaybeTree} tree
 * @param {string | null | undefined} query
 */
export function searchTree(tree, query, limit = Infinity) {
  const needle = String(query ?? "")
    .trim()
    .toLowerCase();
  /** @type {string[]} */
  const found = [];
  if (needle === "") return found;
  walk(tree, (node) => {
    if (found.length >= limit) return;
    const haystack = `${node.path}\u0000${node.name ?? ""}\u0000${node.cls ?? ""}`.toLowerCase();
    if (haystack.includes(needle)) found.push(node.path);
  });
  return found;
}

/**
 * `text` cut into [{text, match}] pieces around each case-insensitive occurrence of `query`.
 * @param {string | null | undefined} text
 * @param {string | null | undefined} query
 */
export function highlightParts(text, query) {
  const source = String(text ?? "");
  const needle = String(query ?? "")
    .trim()
    .toLowerCase();
  if (needle === "") return [{ text: source, match: false }];
  const lower = source.toLowerCase();
  const parts = [];
  let at = 0;
  for (let hit = lower.indexOf(needle); hit >= 0; hit = lower.indexOf(needle, at)) {
    if (hit > at) parts.push({ text: source.slice(at, hit), match: false });
    parts.push({ text: source.slice(hit, hit + needle.length), match: true });
    at = hit + needle.length;
  }
  if (at < source.length) parts.push({ text: source.slice(at), match: false });
  return parts;
}

/**
 * The slice of rows to draw for a scroll position: {start, end} (end exclusive), with `overscan`
 * extra rows on each side so a fast scroll does not show blank space.
 * @param {number} scrollTop
 * @param {number} viewportHeight
 * @param {number} rowHeight
 * @param {number} total
 */
export function visibleWindow(scrollTop, viewportHeight, rowHeight, total, overscan = 10) {
  if (total <= 0 || rowHeight <= 0) return { start: 0, end: 0 };
  const first = Math.floor(Math.max(0, scrollTop) / rowHeight);
  const count = Math.ceil(Math.max(0, viewportHeight) / rowHeight) + 1;
  const start = Math.max(0, Math.min(total - 1, first) - overscan);
  const end = Math.min(total, first + count + overscan);
  return { start, end };
}

/**
 * The scrollTop that brings row `index` into view, moving as little as possible (null: already visible).
 * @param {number} index
 * @param {number} scrollTop
 * @param {number} viewportHeight
 * @param {number} rowHeight
 */
export function scrollToReveal(index, scrollTop, viewportHeight, rowHeight) {
  const top = index * rowHeight;
  const bottom = top + rowHeight;
  if (top < scrollTop) return top;
  if (bottom > scrollTop + viewportHeight) return Math.max(0, bottom - viewportHeight);
  return null;
}
