/** Summary view: per-layer statistics of one step as a sortable table, every step as a heatmap. */

import { displayName, displayPath } from "../format.js";
import { everyLayerKinds } from "../kinds.js";
import { everyLayerStats, everyLayerText, lagText } from "../live_state.js";
import { COLUMN_SIDES, COLUMNS, formatCompact, formatStat, rowObjects, sortRows } from "../summary.js";
import { filterMessage, groupRows, shownText, summaryLines } from "../summary_groups.js";
import { h, listen, pngUrls, setAttr, setText, sortableHeader, subscribe } from "./dom.js";
import { createFigure } from "./readout_view.js";

/** Milliseconds the filter's text waits for the next key before the kernel redraws the heatmap. */
const FILTER_DELAY_MS = 250;

/**
 * Build the summary panel for `model`, sending through `requests`; returns {el, destroy}.
 * @param {import("../widget_model.js").WidgetModel} model
 * @param {import("../widget_model.js").Requests} requests
 */
export function createSummaryView(model, requests) {
  const statsAll = h("button", {
    cls: "hw-stats-all",
    attrs: { type: "button", title: "Attach stats hooks on every module's output and its gradient" },
    text: "Stats on every layer",
  });
  const findNonfinite = h("button", {
    cls: "hw-find-nonfinite",
    attrs: { type: "button", title: "Run the example input once and name the first module whose output holds NaN/Inf" },
    text: "Find first NaN/Inf",
  });
  const field = h("select", { cls: "hw-summary-field", attrs: { "aria-label": "Heatmap statistic" } });
  const step = h("select", { cls: "hw-summary-step", attrs: { "aria-label": "Step shown in the table" } });
  const lag = h("span", { cls: "hw-summary-lag hw-lagging", attrs: { hidden: true } });
  const filterText = h("input", {
    cls: "hw-summary-filter",
    attrs: { type: "search", placeholder: "filter layers", "aria-label": "Show the layers whose path holds this text" },
  });
  const blocksOnly = h("input", { cls: "hw-summary-blocks", attrs: { type: "checkbox" } });
  const blocksLabel = h("label", { attrs: { title: "Only the model's repeated blocks (its layers)" } }, [blocksOnly, "blocks only"]);
  const moduleClass = h("select", { cls: "hw-summary-class", attrs: { "aria-label": "Show the modules of this class" } });
  const shownCount = h("span", { cls: "hw-summary-shown", attrs: { role: "status" } });
  const statsNote = h("div", { cls: "hw-stats-note", attrs: { role: "status", hidden: true } });
  const banner = h("div", { cls: "hw-nonfinite-banner", attrs: { role: "alert", hidden: true } });
  const message = h("div", { cls: "hw-hint" });
  const table = h("table", { cls: "hw-summary-table" });
  // The layers × steps heatmap, with each cell's layer, step and value under the mouse (readout_view.js).
  const heatmap = createFigure({ cls: "hw-summary-heatmap", figure: "summary-heatmap", alt: "statistic per layer and step" });
  const body = h("div", { cls: "hw-summary-body" }, [
    h("div", { cls: "hw-summary-bar" }, [statsAll, findNonfinite, h("label", { text: "step " }, [step]), h("label", { text: "heatmap " }, [field]), lag]),
    statsNote,
    banner,
    message,
    h("div", { cls: "hw-summary-filters" }, [filterText, blocksLabel, moduleClass, shownCount]),
    h("div", { cls: "hw-summary-columns" }, [
      h("div", { cls: "hw-summary-table-box" }, [table]),
      h("div", { cls: "hw-summary-heatmap-box" }, [heatmap.el]), // scrolled at its own size, never shrunk
    ]),
  ]);
  const el = h("details", { cls: "hw-summary-panel", attrs: { open: true } }, [
    h("summary", { cls: "hw-section-title", text: "Summary: statistics per layer" }),
    body,
  ]);
  let sort = { field: "path", descending: false };
  /** Blocks whose rows are folded under their header. */
  const folded = new Set();
  /** @type {ReturnType<typeof setTimeout> | null} */
  let typing = null;
  const images = pngUrls();

  /**
   * @template {string | number} T
   * @param {HTMLSelectElement} select
   * @param {T[]} values
   * @param {T | null | undefined} chosen
   * @param {(value: T) => string} label
   */
  function options(select, values, chosen, label) {
    select.replaceChildren(...values.map((v) => h("option", { attrs: { value: String(v) }, text: label(v) })));
    if (chosen !== null && chosen !== undefined) select.value = String(chosen);
  }

  /** @param {Partial<import("../payloads.js").Summary>} summary */
  function renderTable(summary) {
    const rows = sortRows(rowObjects(summary), sort.field, sort.descending);
    const nonfinite = new Set(summary.nonfinite ?? []);
    const lines = summaryLines(groupRows(rows, summary.blocks ?? []), folded).map((line) => {
      if (line.type === "row") return rowLine(line.row, line.inner ? line.name : null, summary, nonfinite);
      const fold =
        line.count === 0
          ? h("span", { cls: "hw-summary-fold-spacer" }) // nothing inside it is shown: nothing to fold
          : h("span", {
              cls: "hw-summary-fold",
              attrs: { role: "button", tabindex: "0", "aria-expanded": String(line.open), title: `${line.open ? "Fold" : "Show"} its ${line.count} rows` },
            });
      const tr = line.row
        ? rowLine(line.row, null, summary, nonfinite, fold)
        : h("tr", { cls: "hw-summary-group-only" }, [
            h("td", { attrs: { colspan: COLUMNS.length } }, [pathCell(line.block, fold)]),
          ]);
      tr.classList.add("hw-summary-group");
      tr.setAttribute("data-block", line.block);
      return tr;
    });
    const sorted = sortableHeader(COLUMNS, sort);
    const pathHead = /** @type {HTMLElement} */ (sorted.firstElementChild);
    pathHead.setAttribute("rowspan", "2");
    const sides = h("tr", { cls: "hw-summary-sides" }, [
      pathHead,
      ...COLUMN_SIDES.map(([side, span]) => h("th", { cls: "hw-summary-side", attrs: { colspan: span }, text: side })),
    ]);
    const cols = h("colgroup", {}, COLUMNS.map(([key]) => h("col", { cls: `hw-col-${key}` })));
    table.replaceChildren(cols, h("thead", {}, [sides, sorted]), h("tbody", {}, lines));
    const total = summary.total ?? rows.length;
    setText(shownCount, total > 0 ? shownText(rows.length, total) : "");
  }

  /**
   * One layer's row: its path (`inner`: the rest of it under its block's header), cut from the left when narrow
   * (the full path on hover), and its statistics.
   * @param {import("../summary.js").SummaryRow} row
   * @param {string | null} inner
   * @param {Partial<import("../payloads.js").Summary>} summary
   * @param {Set<string>} nonfinite
   * @param {HTMLElement | null} [fold]
   */
  function rowLine(row, inner, summary, nonfinite, fold = null) {
    const cls = ["hw-summary-row"];
    if (inner !== null) cls.push("hw-summary-inner");
    if (nonfinite.has(row.path)) cls.push("hw-nonfinite");
    if (row.path === summary.first_nonfinite) cls.push("hw-first-nonfinite");
    return h(
      "tr",
      { cls: cls.join(" "), attrs: { "data-path": row.path } },
      COLUMNS.map(([key]) =>
        key === "path"
          ? h("td", {}, [pathCell(row.path, fold, inner)])
          : h("td", { attrs: { title: formatStat(key, row[key]) }, text: formatCompact(key, row[key]) }),
      ),
    );
  }

  /**
   * @param {string} path
   * @param {HTMLElement | null} fold
   * @param {string | null} [inner] the part of the path shown under its block's header
   */
  function pathCell(path, fold, inner = null) {
    const full = displayPath(path);
    // The text isolated left-to-right inside a right-to-left box: the ellipsis cuts the path's start, not its end.
    return h("span", { cls: "hw-summary-path-cell" }, [
      fold,
      h("span", { cls: "hw-summary-path", attrs: { title: full } }, [h("bdi", { text: inner === null ? full : displayName(inner) })]),
    ]);
  }

  function sendFilter() {
    if (typing !== null) clearTimeout(typing);
    typing = null;
    requests.send(filterMessage({ text: filterText.value, blocksOnly: blocksOnly.checked, moduleClass: moduleClass.value }));
  }

  function onFilterInput() {
    if (typing !== null) clearTimeout(typing);
    typing = setTimeout(sendFilter, FILTER_DELAY_MS);
  }

  /** @param {Partial<import("../payloads.js").Summary>} summary */
  function renderFilter(summary) {
    const chosen = summary.filter ?? { text: "", blocks_only: false, module_class: "" };
    if (typing === null && document.activeElement !== filterText) filterText.value = chosen.text;
    blocksOnly.checked = chosen.blocks_only;
    const blocks = summary.blocks ?? [];
    blocksOnly.disabled = blocks.length === 0 && !chosen.blocks_only;
    const why = blocks.length
      ? `Only the model's ${blocks.length} repeated blocks (the items of a list of modules of one class)`
      : "This model holds no list of repeated blocks";
    setAttr(blocksLabel, "title", why);
    const classes = [...(summary.classes ?? [])];
    if (chosen.module_class && !classes.includes(chosen.module_class)) classes.push(chosen.module_class);
    options(moduleClass, ["", ...classes], chosen.module_class, (c) => (c ? displayName(c) : "every class"));
  }

  function update() {
    const summary = model.get("summary") ?? {};
    options(field, summary.fields ?? [], summary.field, (f) => f);
    options(step, summary.steps ?? [], summary.step, (s) => `step ${s}`);
    setText(message, summary.message ?? "");
    message.hidden = !summary.message;
    const first = summary.first_nonfinite;
    banner.hidden = first === null || first === undefined;
    setText(banner, banner.hidden ? "" : `First module whose output held NaN/Inf: ${displayPath(first)}`);
    renderFilter(summary);
    renderTable(summary);
    images.revoke();
    heatmap.show(images, summary.heatmap ?? null, summary.heatmap_hover ?? null);
    renderLag();
    renderStatsNote();
  }

  /** While a cell runs, a summary drawn at an older step than the live one says so. */
  function renderLag() {
    const steps = model.get("summary")?.steps ?? [];
    const text = lagText(steps[steps.length - 1] ?? null, model.get("status"));
    lag.hidden = text === "";
    setText(lag, text);
  }

  /**
   * What "Stats on every layer" attached, and what fills it, until statistics come; or its error.
   * @param {string} [error]
   */
  function renderStatsNote(error = "") {
    const empty = (model.get("summary")?.rows ?? []).length === 0;
    const kinds = model.get("hook_kinds");
    const text = error || (empty ? everyLayerText(everyLayerStats(model.get("hooks"), kinds), kinds) : "");
    statsNote.hidden = !text;
    setText(statsNote, text);
    // The note replaces the empty summary's "turn on stats" once they are on.
    message.hidden = !model.get("summary")?.message || Boolean(text && !error);
  }

  /** @param {MouseEvent} event */
  function onTableClick(event) {
    const target = /** @type {Element} */ (event.target);
    const fold = target.closest?.(".hw-summary-fold");
    if (fold) {
      const block = /** @type {string} */ (fold.closest("tr")?.getAttribute("data-block"));
      if (folded.has(block)) folded.delete(block);
      else folded.add(block);
      renderTable(model.get("summary") ?? {});
      const again = /** @type {HTMLElement | null} */ (table.querySelector(`tr[data-block="${CSS.escape(block)}"] .hw-summary-fold`));
      again?.focus();
      return;
    }
    const th = target.closest?.("th[data-field]");
    if (th) {
      const key = /** @type {string} */ (th.getAttribute("data-field"));
      sort = { field: key, descending: sort.field === key ? !sort.descending : key !== "path" };
      renderTable(model.get("summary") ?? {});
      return;
    }
    const row = target.closest?.("tr[data-path]");
    if (row) {
      model.set("selected", /** @type {string} */ (row.getAttribute("data-path")));
      model.save_changes();
    }
  }

  function onStatsAll() {
    // Gradients through tensor hooks (global_grad): unlike full backward hooks, in-place ops cannot break them.
    statsAll.disabled = true;
    statsNote.hidden = false;
    setText(statsNote, "Attaching stats on every layer's output and gradient…");
    const sent = everyLayerKinds(model.get("hook_kinds")).map((kind) =>
      requests.send({ type: "attach", path: "", kind, action: "stats", edit: null }),
    );
    Promise.all(sent).then((answers) => {
      statsAll.disabled = false;
      const failed = answers.find((answer) => !answer.ok);
      renderStatsNote(failed ? `Stats on every layer failed: ${failed.error}` : "");
    });
  }

  const offs = [
    subscribe(model, ["change:summary"], update),
    subscribe(model, ["change:status"], renderLag),
    subscribe(model, ["change:hooks"], () => renderStatsNote()),
    listen(table, "click", onTableClick),
    listen(table, "keydown", (event) => {
      const target = /** @type {Element} */ (event.target);
      if ((event.key === "Enter" || event.key === " ") && target.classList?.contains("hw-summary-fold")) {
        event.preventDefault();
        /** @type {HTMLElement} */ (target).click();
      }
    }),
    listen(filterText, "input", onFilterInput),
    listen(filterText, "change", sendFilter),
    listen(blocksOnly, "change", sendFilter),
    listen(moduleClass, "change", sendFilter),
    listen(statsAll, "click", onStatsAll),
    listen(findNonfinite, "click", () => requests.send({ type: "find_nonfinite" })),
    listen(field, "change", () => requests.send({ type: "summary", field: field.value })),
    listen(step, "change", () => requests.send({ type: "summary", step: Number(step.value) })),
  ];
  update();
  return {
    el,
    destroy() {
      offs.forEach((off) => off());
      if (typing !== null) clearTimeout(typing);
      images.revoke();
    },
  };
}
