/** Summary view: per-layer statistics of one step as a sortable table, every step as a heatmap. */

import { displayPath } from "../format.js";
import { everyLayerKinds } from "../kinds.js";
import { everyLayerStats, everyLayerText, lagText } from "../live_state.js";
import { COLUMNS, formatStat, rowObjects, sortRows } from "../summary.js";
import { h, listen, pngUrls, setText, sortableHeader, subscribe } from "./dom.js";

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
  const statsNote = h("div", { cls: "hw-stats-note", attrs: { role: "status", hidden: true } });
  const banner = h("div", { cls: "hw-nonfinite-banner", attrs: { role: "alert", hidden: true } });
  const message = h("div", { cls: "hw-hint" });
  const table = h("table", { cls: "hw-summary-table" });
  const heatmap = h("img", { cls: "hw-summary-heatmap", attrs: { alt: "statistic per layer and step", hidden: true } });
  const body = h("div", { cls: "hw-summary-body" }, [
    h("div", { cls: "hw-summary-bar" }, [statsAll, findNonfinite, h("label", { text: "step " }, [step]), h("label", { text: "heatmap " }, [field]), lag]),
    statsNote,
    banner,
    message,
    h("div", { cls: "hw-summary-columns" }, [
      h("div", { cls: "hw-summary-table-box" }, [table]),
      h("div", { cls: "hw-summary-heatmap-box" }, [heatmap]), // scrolled at its own size, never shrunk
    ]),
  ]);
  const el = h("details", { cls: "hw-summary-panel", attrs: { open: true } }, [
    h("summary", { cls: "hw-section-title", text: "Summary: statistics per layer" }),
    body,
  ]);
  let sort = { field: "path", descending: false };
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
    const head = sortableHeader(COLUMNS, sort);
    const lines = rows.map((row) => {
      const cls = ["hw-summary-row"];
      if (nonfinite.has(row.path)) cls.push("hw-nonfinite");
      if (row.path === summary.first_nonfinite) cls.push("hw-first-nonfinite");
      return h(
        "tr",
        { cls: cls.join(" "), attrs: { "data-path": row.path } },
        COLUMNS.map(([key]) =>
          h("td", { text: key === "path" ? displayPath(row.path) : formatStat(key, row[key]) }),
        ),
      );
    });
    table.replaceChildren(h("thead", {}, [head]), h("tbody", {}, lines));
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
    renderTable(summary);
    images.revoke();
    images.show(heatmap, summary.heatmap);
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
      images.revoke();
    },
  };
}
