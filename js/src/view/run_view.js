/** The run view (`hookwidgets.open_run(log_dir)` displayed): the log's module tree beside a layers × steps heatmap
 * of a chosen field and the ranks × layers of a chosen step; the first NaN/Inf marked and stated; it follows the log
 * as the kernel reads it again. */

import { displayName } from "../format.js";
import { columnOfStep, nonfiniteText, stepOfColumn } from "../grid.js";
import { h, listen, setAttr, setText } from "./dom.js";
import { createGridCanvas } from "./grid_canvas.js";
import { createModuleTree } from "./tree_view.js";
import "./run.css";

/**
 * The run view's tree: its `tree` and `selected`, no hooks, the first non-finite's module marked.
 * @param {import("../widget_model.js").RunModel} model
 * @returns {import("./tree_view.js").TreeSource}
 */
function runTree(model) {
  /** @type {Record<string, `change:${keyof import("../payloads.js").RunTraitlets}`[]>} */
  const events = { tree: ["change:tree"], hooks: [], selected: ["change:selected"], marked: ["change:run"] };
  return {
    tree: () => model.get("tree"),
    selected: () => model.get("selected") ?? "",
    select: (path) => {
      model.set("selected", path);
      model.save_changes();
    },
    hooks: () => [],
    kinds: () => [],
    marked: () => model.get("run")?.first_nonfinite?.path ?? null,
    on: (parts, callback) => {
      const names = parts.flatMap((part) => events[part] ?? []);
      names.forEach((name) => model.on(name, callback));
      return () => names.forEach((name) => model.off(name, callback));
    },
  };
}

/**
 * Render the run view into `el`; returns the cleanup.
 * @param {{model: import("../widget_model.js").RunModel, el: HTMLElement}} context
 */
export function renderRun({ model, el }) {
  const source = h("span", { cls: "hw-run-source" });
  const counts = h("span", { cls: "hw-run-counts" });
  const live = h("span", { cls: "hw-run-live" });
  const banner = h("div", { cls: "hw-nonfinite-banner hw-run-nonfinite", attrs: { role: "alert", hidden: true } });
  const notes = h("div", { cls: "hw-run-notes", attrs: { hidden: true } });
  const message = h("div", { cls: "hw-hint hw-run-message", attrs: { hidden: true } });
  const errorText = h("pre", { cls: "hw-error-text" });
  const error = h("div", { cls: "hw-error", attrs: { role: "alert", hidden: true } }, [errorText]);
  const kind = h("select", { cls: "hw-run-kind", attrs: { "aria-label": "Hook kind shown" } });
  const field = h("select", { cls: "hw-run-field", attrs: { "aria-label": "Statistic shown" } });
  const rank = h("select", { cls: "hw-run-rank", attrs: { "aria-label": "Rank of the layers × steps heatmap" } });
  const tree = createModuleTree(runTree(model));
  const heatmap = createGridCanvas({
    cls: "hw-run-heatmap",
    label: "statistic per layer and step",
    hint: "Hover a cell to read its value; click a column to see that step per rank.",
    onPick: (row, column) => {
      const step = stepOfColumn(model.get("heatmap")?.columns?.[column]);
      const layer = model.get("heatmap")?.rows?.[row];
      if (step !== null) model.set("step", step);
      if (layer !== undefined) model.set("selected", layer);
      model.save_changes();
    },
  });
  const ranks = createGridCanvas({
    cls: "hw-run-ranks",
    label: "statistic per rank and layer at the chosen step",
    hint: "Hover a cell to read a rank's value; click one to select its layer.",
    onPick: (_row, column) => {
      const layer = model.get("ranks_view")?.columns?.[column];
      if (layer === undefined) return;
      model.set("selected", layer);
      model.save_changes();
    },
  });
  const plots = h("div", { cls: "hw-pane hw-run-plots" }, [
    h("div", { cls: "hw-run-pickers" }, [
      h("label", { text: "kind " }, [kind]),
      h("label", { text: "statistic " }, [field]),
      h("label", { text: "heatmap of " }, [rank]),
    ]),
    heatmap.el,
    ranks.el,
  ]);
  tree.el.classList.add("hw-pane", "hw-run-tree");
  const root = h("div", { cls: "hw-explorer hw-run" }, [
    h("div", { cls: "hw-run-header" }, [h("span", { cls: "hw-title", text: "Run log" }), source, counts, live]),
    banner,
    error,
    notes,
    message,
    h("div", { cls: "hw-run-body" }, [tree.el, plots]),
  ]);
  el.append(root);

  function renderRunState() {
    const run = model.get("run") ?? {};
    setText(source, displayName(run.source ?? ""));
    setAttr(source, "title", run.source ?? "");
    const steps = run.steps ?? [];
    const span = steps.length > 0 ? ` (${steps[0]}–${steps[steps.length - 1]})` : "";
    const rankCount = (run.ranks ?? []).length;
    setText(counts, `${rankCount} ${rankCount === 1 ? "rank" : "ranks"} · ${steps.length} ${steps.length === 1 ? "step" : "steps"}${span}`);
    setText(live, run.live ? "● following the log" : `not following: ${run.stopped || "stopped"}`);
    live.dataset.live = String(Boolean(run.live));
    const text = nonfiniteText(run.first_nonfinite);
    banner.hidden = text === "";
    setText(banner, text);
    setText(notes, (run.notes ?? []).join("\n"));
    notes.hidden = (run.notes ?? []).length === 0;
    setText(message, run.message ?? "");
    message.hidden = !run.message;
    options(kind, run.kinds ?? [], run.kind ?? "");
    options(field, run.fields ?? [], run.field ?? "");
    const ranks = (run.ranks ?? []).map(String);
    options(rank, ["all", ...ranks], run.rank ?? "all", (r) => (r === "all" ? "all ranks" : `rank ${r}`));
  }

  /**
   * Fill `select` with `values` (only when they changed: an open picker stays open) and choose `chosen`.
   * @param {HTMLSelectElement} select
   * @param {string[]} values
   * @param {string} chosen
   * @param {(value: string) => string} [label]
   */
  function options(select, values, chosen, label = (value) => value) {
    if ([...select.options].map((o) => o.value).join("\n") !== values.join("\n")) {
      select.replaceChildren(...values.map((v) => h("option", { attrs: { value: v }, text: label(v) })));
    }
    select.value = chosen;
  }

  function renderGrids() {
    const run = model.get("run") ?? {};
    const shown = run.field ?? "";
    const selected = model.get("selected") ?? "";
    const heat = model.get("heatmap");
    // The tree's default selection is the root (""): a row is outlined once the user picks a layer.
    const row = selected === "" ? -1 : (heat?.rows?.indexOf(selected) ?? -1);
    const column = columnOfStep(heat?.columns, run.step);
    heatmap.show(heat, shown, { highlightRow: row >= 0 ? row : null, highlightColumn: column });
    ranks.show(model.get("ranks_view"), shown);
  }

  function renderError() {
    const text = model.get("error") ?? "";
    error.hidden = text === "";
    setText(errorText, text);
  }

  /** @type {[`change:${keyof import("../payloads.js").RunTraitlets}`, () => void][]} */
  const subscriptions = [
    ["change:run", renderRunState],
    ["change:heatmap", renderGrids],
    ["change:ranks_view", renderGrids],
    ["change:selected", renderGrids],
    ["change:error", renderError],
  ];
  subscriptions.forEach(([event, callback]) => model.on(event, callback));
  const offPickers = [
    listen(kind, "change", () => {
      model.set("kind", kind.value);
      model.save_changes();
    }),
    listen(field, "change", () => {
      model.set("field", field.value);
      model.save_changes();
    }),
    listen(rank, "change", () => {
      model.set("rank", rank.value);
      model.save_changes();
    }),
  ];
  renderRunState();
  renderGrids();
  renderError();
  return () => {
    subscriptions.forEach(([event, callback]) => model.off(event, callback));
    offPickers.forEach((off) => off());
    tree.destroy();
    heatmap.destroy();
    ranks.destroy();
    root.remove();
  };
}
