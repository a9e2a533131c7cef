/** hookwidgets explorer view (anywidget ESM): module tree, inspector, plots and error box. */

import "./widget.css";
import { h } from "./view/dom.js";
import { createErrorBox } from "./view/error_box.js";
import { createHeader } from "./view/header.js";
import { createInspector } from "./view/inspector.js";
import { createTreeView } from "./view/tree_view.js";

/** Render the explorer into `el`; returns the cleanup that removes listeners and Blob URLs. */
function render({ model, el }) {
  const header = createHeader(model);
  const errorBox = createErrorBox(model);
  const tree = createTreeView(model);
  const inspector = createInspector(model);
  const root = h("div", { cls: "hw-explorer" }, [
    header.el,
    errorBox.el,
    h("div", { cls: "hw-body" }, [
      h("div", { cls: "hw-tree-panel" }, [tree.el]),
      inspector.el,
    ]),
  ]);
  el.append(root);
  return () => {
    for (const part of [header, errorBox, tree, inspector]) part.destroy();
    root.remove();
  };
}

export default { render };
