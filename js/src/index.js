/** hookwidgets explorer view (anywidget ESM): header and run bar over two panes of tabs: the module tree or the graph,
 * beside the inspector, attribution, summary, training, logit lens and patching panels. */

import "./widget.css";
import "./snapshot_output.css";
import { createRequests } from "./requests.js";
import { h } from "./view/dom.js";
import { createAttributionView } from "./view/attribution_view.js";
import { createErrorBox } from "./view/error_box.js";
import { createGraphView } from "./view/graph_view.js";
import { createHeader } from "./view/header.js";
import { createInspector } from "./view/inspector.js";
import { createLensView } from "./view/lens_view.js";
import { createPatchingView } from "./view/patching_view.js";
import { renderRun } from "./view/run_view.js";
import { createSummaryView } from "./view/summary_view.js";
import { createTabs } from "./view/tabs.js";
import { createFrameSync } from "./view/frame_sync.js";
import { createThemeSync } from "./view/theme_sync.js";
import { createTrainingView } from "./view/training_view.js";
import { createTreeView } from "./view/tree_view.js";

/**
 * Render the explorer into `el`; returns the cleanup that removes listeners and Blob URLs.
 * @param {{model: import("./widget_model.js").WidgetModel, el: HTMLElement}} context
 */
function render({ model, el }) {
  const requests = createRequests(model); // each message gets its one reply
  const header = createHeader(model, requests);
  const errorBox = createErrorBox(model, requests);
  const tree = createTreeView(model);
  const graph = createGraphView(model, { requests });
  const inspector = createInspector(model, requests);
  const attribution = createAttributionView(model, requests);
  const summary = createSummaryView(model, requests); // per-layer statistics
  const training = createTrainingView(model); // update ratios and DDP, once an optimizer or DDP is watched
  const lens = createLensView(model, requests); // language models: each block's next-token prediction
  const patching = createPatchingView(model, requests); // sweeps from the page, and the last ex.patch_sweep()
  // What to look at on the left (the modules, or the graph) beside what to do with it on the right.
  const navigator = createTabs(
    [
      { key: "modules", label: "Modules", title: "The module tree: select a module to hook it", el: tree.el },
      {
        key: "graph",
        label: "Graph",
        title: "The autograd graph or the module dataflow of one forward",
        el: graph.el,
        onShow: graph.shown, // its first visit records the example inputs' graph
      },
    ],
    "Model views",
  );
  const details = createTabs(
    [
      { key: "inspector", label: "Inspector", title: "The selection's hooks and captures", el: inspector.el },
      { key: "attribution", label: "Attribution", title: "Attribution for the selected module", el: attribution.el },
      { key: "summary", label: "Summary", title: "Statistics per layer and step", el: summary.el },
      { key: "training", label: "Training", title: "Update ratios and DDP", el: training.el, announce: true },
      { key: "lens", label: "Logit lens", title: "What each block predicts next", el: lens.el },
      { key: "patching", label: "Patching", title: "Activation patching: clean and corrupted inputs, and the last sweep", el: patching.el, announce: true },
    ],
    "Panels",
  );
  navigator.el.classList.add("hw-navigator");
  details.el.classList.add("hw-details");
  const root = h("div", { cls: "hw-explorer" }, [
    header.el,
    errorBox.el,
    h("div", { cls: "hw-body" }, [navigator.el, details.el]),
  ]);
  el.classList.add("hw-host"); // its width decides whether the panes stack (widget.css)
  el.append(root);
  const theme = createThemeSync(model, root); // the kernel draws the figures in the page's theme
  const frame = createFrameSync(model, details.el); // and for the details pane's width and the screen's pixel ratio
  return () => {
    graph.destroy();
    theme.destroy();
    frame.destroy();
    const parts = [header, errorBox, tree, inspector, attribution, summary, training, lens, patching];
    for (const part of [...parts, navigator, details]) part.destroy();
    requests.destroy();
    root.remove();
    el.classList.remove("hw-host");
  };
}

/**
 * Render the explorer, or once it is closed (`closed`: `ex.close()`, or the explorer dropped) the placeholder that
 * says so in its place; returns the cleanup.
 * @param {{model: import("./widget_model.js").WidgetModel, el: HTMLElement}} context
 */
function renderExplorer({ model, el }) {
  let cleanup = model.get("closed") ? renderClosed({ model, el }) : render({ model, el });
  const onClosed = () => {
    if (!model.get("closed")) return;
    cleanup();
    cleanup = renderClosed({ model, el });
  };
  model.on("change:closed", onClosed);
  return () => {
    model.off("change:closed", onClosed);
    cleanup();
  };
}

/**
 * The closed explorer's placeholder: one line ("closed: hooks removed, model as found"); returns the cleanup.
 * @param {{model: import("./widget_model.js").WidgetModel, el: HTMLElement}} context
 */
function renderClosed({ model, el }) {
  const root = h("div", { cls: "hw-explorer hw-closed", attrs: { role: "status" } }, [
    h("span", { cls: "hw-closed-text", text: model.get("closed") ?? "" }),
  ]);
  el.append(root);
  return () => root.remove();
}

/**
 * Render the view of `model`: the run view for a run log's model (it has a `run` traitlet), else the explorer.
 * @param {{model: import("./widget_model.js").WidgetModel | import("./widget_model.js").RunModel, el: HTMLElement}} context
 */
function renderAny({ model, el }) {
  const probe = /** @type {{get(name: string): unknown}} */ (model);
  if (probe.get("run") !== undefined) return renderRun({ model: /** @type {import("./widget_model.js").RunModel} */ (model), el });
  return renderExplorer({ model: /** @type {import("./widget_model.js").WidgetModel} */ (model), el });
}

export default { render: renderAny };
