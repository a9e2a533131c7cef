/** Header: model class name, module count, status line and the Run button. */

import { countModules, isTree } from "../tree.js";
import { h, listen, subscribe } from "./dom.js";

/** Build the header for `model`; returns {el, destroy}. */
export function createHeader(model) {
  const title = h("span", { cls: "hw-title" });
  const count = h("span", { cls: "hw-count" });
  const status = h("span", { cls: "hw-status", attrs: { role: "status", "aria-live": "polite" } });
  const run = h("button", {
    cls: "hw-run",
    attrs: { type: "button", title: "Forward the example input, then backward from each item's top class" },
    text: "Run",
  });
  const el = h("div", { cls: "hw-header" }, [title, count, status, run]);

  function updateTree() {
    const tree = model.get("tree");
    if (isTree(tree)) {
      title.textContent = tree.name || tree.cls || "model";
      const n = countModules(tree);
      count.textContent = `${n} ${n === 1 ? "module" : "modules"}`;
    } else {
      title.textContent = "—";
      count.textContent = "";
    }
  }

  function updateStatus() {
    const state = model.get("status") ?? {};
    const name = typeof state.state === "string" ? state.state : "idle";
    status.setAttribute("data-state", name);
    status.textContent = state.message ?? "";
    run.disabled = name === "busy";
  }

  const offs = [
    subscribe(model, ["change:tree"], updateTree),
    subscribe(model, ["change:status"], updateStatus),
    listen(run, "click", () => model.send({ kind: "run" })),
  ];
  updateTree();
  updateStatus();
  return { el, destroy: () => offs.forEach((off) => off()) };
}
