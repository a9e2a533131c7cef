/**
 * Graph panel: the module dataflow or autograd graph as SVG, clusters that expand on click, selection synced
 * with `selected`, drawn at a readable size with a minimap, a Fit that shows the whole graph, and a search that centres
 * on nodes and modules. Its first visit records the example inputs' graph when there is none yet.
 */

import "./graph.css";
import { StaleLayout, createLayoutClient } from "../graph/layout_client.js";
import { layoutRequest } from "../graph/layout_request.js";
import { autogradModel, dataflowModel } from "../graph/model.js";
import { matchCount, matchKeys, searchGraph } from "../graph/search.js";
import { READABLE_SCALE } from "../graph/viewport.js";
import {
  collapseSubtree,
  depthThatFits,
  expandSubtree,
  resolveSelection,
  revealSelection,
  selectionKey,
  visibleGraph,
} from "../graph/visible.js";
import { createRequests } from "../requests.js";
import { h, listen, setText, subscribe } from "./dom.js";
import { createMinimap } from "./graph_minimap.js";
import { drawBadges, drawSteps, ensureTooltip, s, tooltip } from "./graph_svg.js";
import { createPanZoom } from "./pan_zoom.js";

/** @typedef {import("../graph/model.js").GraphModel} GraphModel */
/** @typedef {import("../graph/model.js").GraphPlace} GraphPlace */
/** A view of the `graph` traitlet. @typedef {"autograd" | "dataflow"} Mode */

/** @type {[Mode, string][]} */
const VIEWS = [
  ["autograd", "Autograd graph"],
  ["dataflow", "Module dataflow"],
];
/** The GraphModel of a view's payload. @type {Record<Mode, (payload: object) => GraphModel>} */
const BUILDERS = { autograd: autogradModel, dataflow: dataflowModel };
// Drawing runs in slices of about this many ms of script, one per frame, so a 500-node
// expansion never blocks the page: the style and layout of each slice follow in its frame.
const SLICE_MS = 6;

/**
 * How many items fit the canvas readably: roughly one per 150×56 px, within [24, 120].
 * @param {number} width
 * @param {number} height
 */
export function itemBudget(width, height) {
  return Math.max(24, Math.min(120, Math.floor((width * height) / (150 * 56))));
}

/**
 * Hook kinds by path (node id or module path), from the `hooks` traitlet.
 * @param {import("../payloads.js").HookItem[]} hooks
 */
function hooksByPath(hooks) {
  /** @type {Map<string, string[]>} */
  const byPath = new Map();
  for (const hook of Array.isArray(hooks) ? hooks : []) {
    if (!hook || typeof hook.path !== "string" || hook.foreign) continue;
    const kinds = byPath.get(hook.path) ?? [];
    if (!kinds.includes(hook.kind)) kinds.push(hook.kind);
    byPath.set(hook.path, kinds);
  }
  return byPath;
}

/**
 * Build the graph panel for `model`, sending through `requests`; returns {el, destroy}.
 * @param {import("../widget_model.js").WidgetModel} model
 * @param {{layoutClient?: ReturnType<typeof createLayoutClient>, requests?: import("../widget_model.js").Requests}} [services]
 */
export function createGraphView(model, { layoutClient = createLayoutClient(), requests = createRequests(model) } = {}) {
  const record = h("button", {
    cls: "hw-graph-record",
    attrs: { type: "button", title: "Run the example input forward and record its autograd graph" },
    text: "Record graph",
  });
  const modeButtons = VIEWS.map(([mode, text]) =>
    h("button", { cls: "hw-graph-mode", attrs: { type: "button", "data-mode": mode, "aria-pressed": "false" }, text }),
  );
  const fitButton = h("button", {
    cls: "hw-graph-fit",
    attrs: { type: "button", title: "Fit the whole graph in view (the wheel zooms in; the minimap shows where you are)" },
    text: "Fit",
  });
  const search = h("input", {
    cls: "hw-graph-search",
    attrs: {
      type: "search",
      placeholder: "Find node or module",
      "aria-label": "Find a node or module in the graph",
      title: "Find a node (op, parameter) or module by name or path: Enter next, Shift+Enter previous, Escape clears",
      spellcheck: "false",
    },
  });
  const found = h("span", { cls: "hw-graph-search-count", attrs: { "aria-live": "polite" } });
  const previous = h("button", { cls: "hw-graph-search-prev", attrs: { type: "button", title: "Previous match (Shift+Enter)", "aria-label": "previous match" }, text: "↑" });
  const next = h("button", { cls: "hw-graph-search-next", attrs: { type: "button", title: "Next match (Enter)", "aria-label": "next match" }, text: "↓" });
  const status = h("span", { cls: "hw-graph-status", attrs: { role: "status", "aria-live": "polite" } });
  const errorText = h("pre", { cls: "hw-graph-error", attrs: { hidden: true } });
  const layer = s("g", { class: "hw-graph-layer" });
  const svg = s("svg", { class: "hw-graph-canvas", role: "img", "aria-label": "graph" }, [layer]);
  /** @type {ReturnType<typeof createMinimap>} */
  let minimap; // made once panZoom exists; it redraws on panZoom's moves
  const panZoom = createPanZoom(svg, layer, { onChange: () => minimap?.update() });
  minimap = createMinimap(panZoom);
  const el = h("div", { cls: "hw-graph-panel" }, [
    h("div", { cls: "hw-graph-toolbar" }, [
      record,
      ...modeButtons,
      fitButton,
      h("span", { cls: "hw-graph-find" }, [search, found, previous, next]),
      status,
    ]),
    errorText,
    h("div", { cls: "hw-graph-stage" }, [svg, minimap.el]),
  ]);

  /** @type {Mode} */
  let mode = "autograd";
  /** @type {import("../payloads.js").Graph | null} */
  let payload = null; // the `graph` traitlet the models were built from
  /** @type {Partial<Record<Mode, GraphModel>>} */
  const models = {}; // mode -> GraphModel, built on first use
  /** @type {Partial<Record<Mode, Set<number>>>} */
  const expanded = {}; // mode -> Set of expanded cluster indices
  /** @type {import("./graph_svg.js").Drawn} */
  let drawn = new Map();
  /** @type {import("../graph/layout.js").Layout | null} */
  let bounds = null;
  let ticket = 0; // newest layout request; older answers are dropped
  let recording = false; // a Record graph request awaits its reply
  let destroyed = false;
  let frame = 0; // the pending requestAnimationFrame of a drawing or of the first render
  /** @type {GraphPlace[]} */
  let matches = []; // the search's matches in the current view, as selections {node, cluster}
  let cursor = -1; // the match last centred on
  let visited = false; // the panel was shown once: its first visit records the example inputs' graph

  /**
   * @param {string} state
   * @param {string} text
   */
  function setStatus(state, text) {
    status.setAttribute("data-state", state);
    setText(status, text);
    el.setAttribute("data-state", state);
  }

  /** @returns {GraphModel | null} */
  const current = () => {
    const shown = payload?.[mode];
    if (!shown) return null;
    return (models[mode] ??= BUILDERS[mode](shown));
  };

  /** The current view's expanded clusters: set by show() before anything of the view is drawn. */
  const openClusters = () => /** @type {Set<number>} */ (expanded[mode]);

  const selection = (/** @type {GraphModel} */ graph) => resolveSelection(graph, model.get("selected"));

  function updateToolbar() {
    for (const button of modeButtons) {
      const on = button.getAttribute("data-mode") === mode;
      button.setAttribute("aria-pressed", String(on));
      button.disabled = !payload?.[/** @type {Mode} */ (button.getAttribute("data-mode"))];
    }
    record.disabled = recording;
    fitButton.disabled = !bounds;
    search.disabled = !current();
    previous.disabled = next.disabled = matches.length === 0;
  }

  function onGraph() {
    payload = model.get("graph") ?? null;
    for (const key of VIEWS.map(([view]) => view)) {
      delete models[key];
      delete expanded[key];
    }
    const error = payload?.error ?? "";
    setText(errorText, error);
    errorText.hidden = error === "";
    if (!payload?.[mode]) mode = VIEWS.map(([m]) => m).find((m) => payload?.[m]) ?? mode;
    runSearch();
    show({ fit: true });
  }

  /**
   * Lay out and draw the current view. `fit` fits the graph at a readable scale, around `focus` when it
   * does not fit whole; `focus` alone centres on it: true for the selection, or a {node, cluster} place.
   * @param {{fit?: boolean, focus?: boolean | GraphPlace}} [options]
   */
  function show({ fit = false, focus = false } = {}) {
    updateToolbar();
    const graph = current();
    if (!graph) {
      layer.replaceChildren();
      drawn = new Map();
      bounds = null;
      minimap.clear();
      ticket += 1;
      if (payload?.error) setStatus("error", "no graph");
      else setStatus(recording ? "recording" : "empty", recording ? "recording…" : "No graph yet: press Record graph");
      updateToolbar();
      return;
    }
    expanded[mode] ??= depthThatFits(graph, itemBudget(svg.clientWidth || 900, svg.clientHeight || 480));
    const visible = visibleGraph(graph, openClusters());
    const request = layoutRequest(graph, visible);
    const mine = ++ticket;
    const shown = visible.items.length;
    setStatus("layout", `laying out ${shown.toLocaleString("en-US")} items…`);
    layoutClient.layout(request).then(
      (layout) => {
        if (destroyed || mine !== ticket) return;
        place(graph, layout, { fit, focus });
        drawn = new Map();
        setStatus("layout", `drawing ${shown.toLocaleString("en-US")} items…`);
        const steps = drawSteps(layer, graph, visible, layout, drawn);
        const slice = () => {
          frame = 0;
          if (destroyed || mine !== ticket) return;
          const start = performance.now();
          let step = steps.next();
          while (!step.done && performance.now() - start < SLICE_MS) step = steps.next();
          if (!step.done) {
            frame = requestAnimationFrame(slice);
            return;
          }
          drawBadges(drawn, graph, hooksByPath(model.get("hooks")), model.get("hook_kinds"));
          minimap.draw(layout, new Set(visible.boxes.map((b) => b.key)));
          highlight(graph);
          markMatches(graph);
          const noun = graph.view === "autograd" ? "autograd nodes" : "modules";
          setStatus("ready", `${graph.nodes.length.toLocaleString("en-US")} ${noun} · ${shown.toLocaleString("en-US")} shown`);
          updateToolbar();
        };
        slice();
      },
      (error) => {
        if (destroyed || mine !== ticket || error instanceof StaleLayout) return;
        setStatus("error", error.message);
      },
    );
  }

  /**
   * Pan before drawing, so each drawn slice already shows where it belongs: a fit, or centred on the focus.
   * @param {GraphModel} graph
   * @param {import("../graph/layout.js").Layout} layout
   * @param {{fit: boolean, focus: boolean | GraphPlace}} options
   */
  function place(graph, layout, { fit, focus }) {
    bounds = layout;
    const place = focus === true ? selection(graph) : focus || null;
    const key = place ? selectionKey(graph, openClusters(), place) : null;
    const rect = key !== null ? layout.positions[key] : undefined;
    if (fit) panZoom.fit(layout, rect ? focusPoint(rect) : null);
    else if (rect) panZoom.centerOn(rect[0], rect[1]);
  }

  /**
   * Where to centre a fit on `rect`: its centre, or its top part when it is taller than the view.
   * @param {number[]} rect
   */
  function focusPoint([cx, cy, , h]) {
    const half = panZoom.size().height / 2 / READABLE_SCALE;
    return [cx, Math.min(cy, cy - h / 2 + half - 8)];
  }

  /**
   * Mark the selection's element (its collapsed block when hidden); returns its key (null: nothing selected here).
   * @param {GraphModel} graph
   */
  function highlight(graph) {
    for (const old of layer.querySelectorAll(".hw-gselected")) old.classList.remove("hw-gselected");
    const key = selectionKey(graph, openClusters(), selection(graph));
    if (key !== null) drawn.get(key)?.el.classList.add("hw-gselected");
    return key;
  }

  function onSelected() {
    const graph = current();
    if (!graph || !expanded[mode]) return;
    const place = selection(graph);
    if (place.node < 0 && place.cluster < 0) {
      highlight(graph);
      return;
    }
    const opened = revealSelection(graph, openClusters(), place);
    if (opened.size !== openClusters().size) {
      expanded[mode] = opened;
      show({ focus: true });
      return;
    }
    const key = highlight(graph);
    const item = key === null ? undefined : drawn.get(key);
    if (item && !panZoom.isVisible(item.rect)) panZoom.centerOn(item.rect[0], item.rect[1]);
  }

  /** @param {string} value */
  function select(value) {
    model.set("selected", value);
    model.save_changes();
  }

  /** @param {MouseEvent} event */
  function onClick(event) {
    const graph = current();
    const target = /** @type {Element} */ (event.target).closest?.("[data-key]");
    if (!graph || !target || !layer.contains(target)) return;
    const key = /** @type {string} */ (target.getAttribute("data-key"));
    const index = Number(key.slice(1));
    if (key[0] === "n") {
      select(graph.nodes[index].id);
      return;
    }
    const wasOpen = target.getAttribute("data-expanded") === "true";
    expanded[mode] = wasOpen
      ? collapseSubtree(graph, openClusters(), index)
      : event.shiftKey
        ? expandSubtree(graph, openClusters(), index)
        : new Set(openClusters()).add(index);
    show({ fit: true, focus: { node: -1, cluster: index } });
    // The tree and inspector react to the selection in a task of their own, not inside this click.
    const path = graph.clusters[index].path;
    setTimeout(() => !destroyed && select(path), 0);
  }

  /** @param {PointerEvent} event */
  function onHover(event) {
    const graph = current();
    const target = /** @type {Element} */ (event.target).closest?.("[data-key]");
    if (graph && target && layer.contains(target)) {
      ensureTooltip(target, tooltip(graph, /** @type {string} */ (target.getAttribute("data-key"))));
    }
  }

  function onRecord() {
    const before = [status.getAttribute("data-state") ?? "empty", status.textContent ?? ""];
    recording = true;
    setStatus("recording", "recording…");
    updateToolbar();
    requests.send({ type: "graph" }).then(() => {
      // The reply comes after the new `graph` (drawn by onGraph); a failed or unchanged recording sends none.
      if (destroyed) return;
      recording = false;
      if (!current()) show();
      else {
        // Unchanged (the same graph recorded again): the drawing is still the graph's, and says so again.
        if (status.getAttribute("data-state") === "recording") setStatus(before[0], before[1]);
        updateToolbar();
      }
    });
  }

  /** @param {MouseEvent} event */
  function onMode(event) {
    const chosen = /** @type {Mode} */ (/** @type {Element} */ (event.currentTarget).getAttribute("data-mode"));
    if (chosen === mode || !payload?.[chosen]) return;
    mode = chosen;
    runSearch();
    show({ fit: true });
  }

  /** Find the search box's text in the current view: count and mark the matches, none centred yet. */
  function runSearch() {
    const graph = current();
    matches = graph ? searchGraph(graph, search.value) : [];
    cursor = -1;
    setText(found, matchCount(matches.length, cursor, search.value.trim()));
    found.setAttribute("data-state", search.value.trim() && !matches.length ? "none" : "");
    updateToolbar();
    if (graph && expanded[mode]) markMatches(graph);
  }

  /**
   * Mark every drawn match (a collapsed block holding one) and the current one.
   * @param {GraphModel} graph
   */
  function markMatches(graph) {
    for (const old of layer.querySelectorAll(".hw-gmatch")) old.classList.remove("hw-gmatch", "hw-gmatch-current");
    if (!matches.length) return;
    const keys = matchKeys(graph, openClusters(), matches);
    for (const key of keys) drawn.get(key)?.el.classList.add("hw-gmatch");
    if (cursor >= 0) drawn.get(keys[cursor])?.el.classList.add("hw-gmatch-current");
  }

  /**
   * Centre on the next (`step` 1) or previous (-1) match, opening the blocks that hide it.
   * @param {number} step
   */
  function stepMatch(step) {
    const graph = current();
    if (!graph || !matches.length || !expanded[mode]) return;
    cursor = cursor < 0 ? (step > 0 ? 0 : matches.length - 1) : (cursor + step + matches.length) % matches.length;
    setText(found, matchCount(matches.length, cursor, search.value.trim()));
    const place = matches[cursor];
    const opened = revealSelection(graph, openClusters(), place);
    if (opened.size !== openClusters().size) {
      expanded[mode] = opened;
      show({ focus: place }); // marked when drawn
      return;
    }
    const key = selectionKey(graph, openClusters(), place);
    const item = key === null ? undefined : drawn.get(key);
    if (item) panZoom.centerOn(item.rect[0], item.rect[1]);
    markMatches(graph);
  }

  /** @param {KeyboardEvent} event */
  function onSearchKey(event) {
    if (event.key === "Enter") stepMatch(event.shiftKey ? -1 : 1);
    else if (event.key === "Escape") {
      search.value = "";
      runSearch();
    } else return;
    event.preventDefault();
    event.stopPropagation();
  }

  const offs = [
    subscribe(model, ["change:graph"], onGraph),
    subscribe(model, ["change:selected"], onSelected),
    subscribe(model, ["change:hooks"], () => {
      const graph = current();
      if (graph) drawBadges(drawn, graph, hooksByPath(model.get("hooks")), model.get("hook_kinds"));
    }),
    listen(record, "click", onRecord),
    listen(fitButton, "click", () => bounds && panZoom.fitWhole(bounds)),
    listen(search, "input", runSearch),
    listen(search, "keydown", onSearchKey),
    listen(previous, "click", () => stepMatch(-1)),
    listen(next, "click", () => stepMatch(1)),
    listen(svg, "click", onClick),
    listen(svg, "pointerover", onHover),
    ...modeButtons.map((button) => listen(button, "click", onMode)),
  ];
  // The panel is in the page only after render() returns: measure and draw on the next frame.
  frame = requestAnimationFrame(() => {
    frame = 0;
    onGraph();
  });

  /** The panel is shown (its tab chosen): the first time, with example inputs and no graph yet, record one. */
  function shown() {
    if (visited || destroyed) return;
    visited = true;
    const graph = /** @type {import("../payloads.js").Graph | null} */ (model.get("graph") ?? null);
    if (graph?.recordable && !graph.autograd && !graph.error && !recording) onRecord();
  }

  return {
    el,
    shown,
    destroy() {
      destroyed = true;
      cancelAnimationFrame(frame);
      for (const off of offs) off();
      panZoom.destroy();
      minimap.destroy();
      layoutClient.destroy();
    },
  };
}
