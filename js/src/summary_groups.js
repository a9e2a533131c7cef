/** The summary table's lines: rows grouped under the model's blocks, groups folded; pure, no DOM. */

/**
 * The block `path` belongs to (the block itself or a module inside it), or null outside every block.
 * @param {string} path
 * @param {string[]} blocks
 */
export function blockOf(path, blocks) {
  for (const block of blocks) {
    if (path === block || path.startsWith(`${block}.`)) return block;
  }
  return null;
}

/**
 * A run of the table's rows: those of one block (`head` its own row when the filter kept it), or rows outside
 * every block (`block` null, no head).
 * @typedef {{block: string | null, head: import("./summary.js").SummaryRow | null,
 *   rows: import("./summary.js").SummaryRow[]}} RowGroup
 */

/**
 * `rows` (already sorted) grouped by block: a group comes where its first row does and keeps the rows' order;
 * neighbouring rows outside every block make one group.
 * @param {import("./summary.js").SummaryRow[]} rows
 * @param {string[]} blocks
 * @returns {RowGroup[]}
 */
export function groupRows(rows, blocks) {
  /** @type {RowGroup[]} */
  const groups = [];
  /** @type {Map<string, RowGroup>} */
  const byBlock = new Map();
  for (const row of rows) {
    const block = blockOf(row.path, blocks);
    if (block === null) {
      const last = groups[groups.length - 1];
      if (last && last.block === null) last.rows.push(row);
      else groups.push({ block: null, head: null, rows: [row] });
      continue;
    }
    let group = byBlock.get(block);
    if (!group) {
      group = { block, head: null, rows: [] };
      byBlock.set(block, group);
      groups.push(group);
    }
    if (row.path === block) group.head = row;
    else group.rows.push(row);
  }
  return groups;
}

/**
 * A line of the table: a group's header (its block's own row, or null when the filter dropped it; `count` the
 * rows inside; `open` whether they follow), or a row (`name` its path inside its block, or its path outside one).
 * @typedef {{type: "group", block: string, row: import("./summary.js").SummaryRow | null, count: number,
 *   open: boolean} | {type: "row", row: import("./summary.js").SummaryRow, inner: boolean, name: string}} SummaryLine
 */

/**
 * The lines the table shows: each group's header then, unless folded (`folded` holds its block), its rows.
 * @param {RowGroup[]} groups
 * @param {Set<string>} folded
 * @returns {SummaryLine[]}
 */
export function summaryLines(groups, folded) {
  /** @type {SummaryLine[]} */
  const lines = [];
  for (const group of groups) {
    if (group.block === null) {
      for (const row of group.rows) lines.push({ type: "row", row, inner: false, name: row.path });
      continue;
    }
    const open = !folded.has(group.block);
    lines.push({ type: "group", block: group.block, row: group.head, count: group.rows.length, open });
    const start = group.block.length + 1; // under its block's header a row needs only the rest of its path
    if (open) for (const row of group.rows) lines.push({ type: "row", row, inner: true, name: row.path.slice(start) });
  }
  return lines;
}

/**
 * The `summary` message for a filter the page's controls hold: the text trimmed, the class "" for any.
 * @param {{text: string, blocksOnly: boolean, moduleClass: string}} controls
 * @returns {{type: "summary", filter: string, blocks_only: boolean, module_class: string}}
 */
export function filterMessage({ text, blocksOnly, moduleClass }) {
  return { type: "summary", filter: text.trim(), blocks_only: blocksOnly, module_class: moduleClass };
}

/**
 * What the table shows of the layers: "312 layers", or "24 of 312 layers" when a filter keeps fewer.
 * @param {number} shown
 * @param {number} total
 */
export function shownText(shown, total) {
  const noun = total === 1 ? "layer" : "layers";
  return shown === total ? `${total} ${noun}` : `${shown} of ${total} ${noun}`;
}
