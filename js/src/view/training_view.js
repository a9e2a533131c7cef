/** Training panel: update-to-weight ratios (chart and last-step table), DDP buckets, ranks and gradient-ready order. */

import { displayName } from "../format.js";
import { lagText } from "../live_state.js";
import { RATIO_COLUMNS, flagText, formatRatio, sortRatioRows } from "../training.js";
import { h, listen, pngUrls, setText, sortableHeader, subscribe } from "./dom.js";
import { createFigure } from "./readout_view.js";

/** @typedef {import("../payloads.js").Ratios} Ratios */

/**
 * Build the training panel for `model` (hidden until an optimizer or DDP is watched); returns {el, destroy}.
 * @param {import("../widget_model.js").WidgetModel} model
 */
export function createTrainingView(model) {
  const ratioMessage = h("div", { cls: "hw-hint hw-ratio-message" });
  const ratioCaption = h("div", { cls: "hw-training-caption hw-ratio-caption" });
  const ratioChart = createFigure({ cls: "hw-ratio-chart", figure: "ratios", alt: "update-to-weight ratio per parameter and step" });
  const ratioTable = h("table", { cls: "hw-ratio-table" });
  const ratioSection = h("section", { cls: "hw-ratio-section" }, [
    h("div", { cls: "hw-training-subtitle" }, [
      h("span", { text: "Update-to-weight ratio ‖Δw‖/‖w‖ per optimizer step" }),
      h("span", { cls: "hw-training-guide", text: "about 1e-3 is healthy" }),
    ]),
    ratioMessage,
    h("div", { cls: "hw-training-columns" }, [
      h("div", { cls: "hw-ratio-chart-box" }, [ratioChart.el]), // drawn for the pane's width
      h("div", { cls: "hw-ratio-table-box" }, [ratioCaption, ratioTable]),
    ]),
  ]);

  const ddpSource = h("span", { cls: "hw-training-guide hw-ddp-source" });
  const ddpMessage = h("div", { cls: "hw-hint hw-ddp-message" });
  const bucketImage = createFigure({ cls: "hw-ddp-buckets", figure: "buckets", alt: "DDP buckets of the newest step" });
  const rankImage = createFigure({ cls: "hw-ddp-ranks", figure: "ranks", alt: "communication time and gradient norm per rank" });
  const readyCaption = h("div", { cls: "hw-training-caption hw-ready-caption" });
  const readyTable = h("table", { cls: "hw-ready-table" });
  const ready = h("div", { cls: "hw-ready" }, [readyCaption, h("div", { cls: "hw-ready-box" }, [readyTable])]);
  const ddpSection = h("section", { cls: "hw-ddp-section" }, [
    h("div", { cls: "hw-training-subtitle" }, [h("span", { text: "DDP gradient communication" }), ddpSource]),
    ddpMessage,
    bucketImage.el,
    h("div", { cls: "hw-training-columns" }, [h("div", { cls: "hw-ddp-ranks-box" }, [rankImage.el]), ready]), // the ready order beside the per-rank chart
  ]);

  const title = h("summary", { cls: "hw-section-title", text: "Training" });
  const lag = h("div", { cls: "hw-training-lag hw-lagging", attrs: { hidden: true } });
  const el = h("details", { cls: "hw-training-panel", attrs: { open: true, hidden: true } }, [
    title,
    lag,
    h("div", { cls: "hw-training-body" }, [ratioSection, ddpSection]),
  ]);
  let sort = { field: "param", descending: false };
  const images = pngUrls();

  /**
   * The text in `node`, hidden when there is none.
   * @param {HTMLElement} node
   * @param {string} text
   */
  function showText(node, text) {
    setText(node, text ?? "");
    node.hidden = !text;
  }

  /** @param {Ratios} ratios */
  function renderRatioTable(ratios) {
    const several = (ratios.optimizers ?? []).length > 1;
    const columns = RATIO_COLUMNS.filter(([key]) => key !== "optimizer" || several);
    const head = sortableHeader(columns, sort);
    const lines = sortRatioRows(ratios.rows ?? [], sort.field, sort.descending).map((row) => {
      const cls = row.flag ? `hw-ratio-row hw-ratio-${row.flag}` : "hw-ratio-row";
      const cells = columns.map(([key]) => {
        if (key === "param" || key === "optimizer") return h("td", { text: displayName(row[key]) });
        if (key === "flag") return h("td", { cls: "hw-ratio-flag", text: flagText(row.flag, ratios.low, ratios.high) });
        return h("td", { text: formatRatio(row[key]) });
      });
      return h("tr", { cls, attrs: { "data-param": row.param, "data-flag": row.flag || null } }, cells);
    });
    ratioTable.replaceChildren(h("thead", {}, [head]), h("tbody", {}, lines));
  }

  /** @param {Ratios | null} ratios */
  function updateRatios(ratios) {
    ratioSection.hidden = !ratios;
    if (!ratios) return;
    showText(ratioMessage, ratios.message);
    const rows = ratios.rows ?? [];
    const step = rows.length > 0 ? Math.max(...rows.map((r) => r.step)) : null;
    const parts = [];
    if (step !== null) parts.push(`step ${step}`);
    parts.push((ratios.optimizers ?? []).join(", "));
    if (rows.length > 0) parts.push(ratios.flagged > 0 ? `${ratios.flagged} of ${rows.length} flagged` : "none flagged");
    if (ratios.caption) parts.push(ratios.caption);
    setText(ratioCaption, parts.filter(Boolean).join(" · "));
    ratioChart.show(images, ratios.png, ratios.hover);
    renderRatioTable(ratios);
  }

  /** @param {import("../payloads.js").Ready} order */
  function updateReady(order) {
    const rows = order?.rows ?? [];
    ready.hidden = rows.length === 0;
    if (rows.length === 0) return;
    const note = order.note ? ` · ${order.note}` : "";
    setText(readyCaption, `Gradient-ready order at step ${order.step} (rank ${order.rank})${note}`);
    const head = h("tr", {}, [
      h("th", { text: "#" }),
      h("th", { text: "parameter" }),
      h("th", { text: "ms after the first" }),
    ]);
    const lines = rows.map((row) =>
      h("tr", { cls: "hw-ready-row", attrs: { "data-param": row.param } }, [
        h("td", { text: String(row.order) }),
        h("td", { text: displayName(row.param) }),
        h("td", { text: typeof row.ms === "number" ? row.ms.toFixed(2) : String(row.ms) }),
      ]),
    );
    readyTable.replaceChildren(h("thead", {}, [head]), h("tbody", {}, lines));
  }

  /** @param {import("../payloads.js").DDPPanel | null} ddp */
  function updateDdp(ddp) {
    ddpSection.hidden = !ddp;
    if (!ddp) return;
    const ranks = ddp.ranks ?? [];
    const facts = [ddp.source];
    if (ddp.steps > 0) facts.push(`${ddp.steps} step${ddp.steps === 1 ? "" : "s"}, ${ranks.length} rank${ranks.length === 1 ? "" : "s"}`);
    setText(ddpSource, facts.filter(Boolean).join(" · "));
    showText(ddpMessage, ddp.message);
    bucketImage.show(images, ddp.buckets_png, ddp.buckets_hover);
    rankImage.show(images, ddp.ranks_png, ddp.ranks_hover);
    updateReady(ddp.ready);
  }

  /** While a cell runs, a panel drawn at an older step than the live one says so, as the summary does. */
  function renderLag() {
    const text = lagText(model.get("training")?.step ?? null, model.get("status"));
    lag.hidden = text === "";
    setText(lag, text);
  }

  function update() {
    renderLag();
    const training = model.get("training") ?? {};
    el.hidden = !training.visible;
    const shown = [training.ratios && "update ratios", training.ddp && "DDP communication"].filter(Boolean);
    setText(title, shown.length > 0 ? `Training: ${shown.join(" and ")}` : "Training");
    images.revoke();
    updateRatios(training.ratios);
    updateDdp(training.ddp);
  }

  /** @param {MouseEvent} event */
  function onTableClick(event) {
    const th = /** @type {Element} */ (event.target).closest?.("th[data-field]");
    if (!th) return;
    const key = /** @type {string} */ (th.getAttribute("data-field"));
    // A first click on a number or the check column puts the largest (or flagged) first.
    sort = { field: key, descending: sort.field === key ? !sort.descending : key !== "param" && key !== "optimizer" };
    const ratios = model.get("training")?.ratios;
    if (ratios) renderRatioTable(ratios);
  }

  const offs = [
    subscribe(model, ["change:training"], update),
    subscribe(model, ["change:status"], renderLag),
    listen(ratioTable, "click", onTableClick),
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
