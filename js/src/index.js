/** hookwidgets explorer view (anywidget ESM): header and run bar, module tree, inspector, graph, summary, training,
 * logit lens and patching. */

import "./widget.css";
import { createRequests } from "./requests.js";
import { h } from "./view/dom.js";
import { createErrorBox } from "./view/error_box.js";
import { createGraphView } from "./view/graph_view.js";
import { createHeader } from "./view/header.js";
import { createInspector } from "./view/inspector.js";
import { createLensView } from "./view/lens_view.js";
import { createPatchingView } from "./view/patching_view.js";
import { createSummaryView } from "./view/summary_view.js";
import { createThemeSync } from "./view/theme_sync.js";
import { createTrainingView } from "./view/training_view.js";
import { createTreeView } from "./view/tree_view.js";

/** Render the explorer into `el`; returns the cleanup that removes listeners and Blob URLs. */
function render({ model, el }) {
  const requests = createRequests(model); // each message gets its one reply
  const header = createHeader(model, requests);
  const errorBox = createErrorBox(model, requests);
  const tree = createTreeView(model);
  const inspector = createInspector(model, requests);
  const root = h("div", { cls: "hw-explorer" }, [
    header.el,
    errorBox.el,
    h("div", { cls: "hw-body" }, [
      h("div", { cls: "hw-tree-panel" }, [tree.el]),
      inspector.el,
    ]),
  ]);
  const graph = createGraphView(model, { requests }); // the graph panel, below the tree and the inspector
  root.append(graph.el);
  const summary = createSummaryView(model, requests); // per-layer statistics, below the graph
  root.append(summary.el);
  const training = createTrainingView(model); // update ratios and DDP, once an optimizer or DDP is watched
  root.append(training.el);
  const lens = createLensView(model, requests); // language models: each block's next-token prediction
  root.append(lens.el);
  const patching = createPatchingView(model); // the last ex.patch_sweep(), once one starts
  root.append(patching.el);
  el.append(root);
  const theme = createThemeSync(model, root); // the kernel draws the figures in the page's theme
  return () => {
    graph.destroy();
    theme.destroy();
    for (const part of [header, errorBox, tree, inspector, summary, training, lens, patching]) part.destroy();
    requests.destroy();
    root.remove();
  };
}

export default { render };
