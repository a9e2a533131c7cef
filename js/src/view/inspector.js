/** Inspector: details, hook toggles, live hooks and plots of the selected module. */

import { displayPath, formatCount, formatFired, formatParams, formatShape } from "../format.js";
import { hasHook, hooksAt, indexHooks } from "../hooks.js";
import { findNode, isTree } from "../tree.js";
import { h, listen, subscribe } from "./dom.js";
import { createPlots } from "./plots.js";

// If Python neither changes `hooks` nor reports an error, give the toggle back after this long.
const PENDING_TIMEOUT_MS = 10000;

/** Build the inspector for `model`; returns {el, destroy}. */
export function createInspector(model) {
  const info = h("dl", { cls: "hw-info" });
  const toggles = h("div", { cls: "hw-toggles", attrs: { role: "group", "aria-label": "Hooks" } });
  const hookList = h("ul", { cls: "hw-hook-list" });
  const plots = createPlots(model);
  const el = h("div", { cls: "hw-inspector" }, [
    info,
    h("div", { cls: "hw-section-title", text: "Hooks" }),
    toggles,
    hookList,
    h("div", { cls: "hw-section-title", text: "Captures" }),
    plots.el,
  ]);
  // Kinds whose attach/detach was sent and not yet answered; their checkboxes stay disabled.
  const pending = new Set();
  let pendingTimer = null;

  function selectedPath() {
    const value = model.get("selected");
    return typeof value === "string" ? value : "";
  }

  function selectedNode() {
    const tree = model.get("tree");
    return isTree(tree) ? findNode(tree, selectedPath()) : null;
  }

  function renderInfo(node, path) {
    const entries = [["Path", displayPath(path)]];
    if (node) {
      const dtype = node.dtype ? ` ${node.dtype}` : "";
      entries.push(["Class", node.cls ?? ""]);
      entries.push(["Output", `${formatShape(node.shape)}${dtype}`]);
      entries.push(["Parameters", formatParams(node.trainable ?? 0, node.frozen ?? 0)]);
    } else {
      entries.push(["", "Not in the module tree."]);
    }
    info.replaceChildren(
      ...entries.flatMap(([term, value]) => [h("dt", { text: term }), h("dd", { text: value })]),
    );
    if (node) {
      const exact = `${node.trainable ?? 0} trainable, ${node.frozen ?? 0} frozen`;
      info.lastChild.setAttribute("title", exact);
    }
  }

  function renderToggles(node, path) {
    const kinds = model.get("hook_kinds") ?? [];
    toggles.replaceChildren(
      ...kinds.map((kind) => {
        const input = h("input", {
          cls: "hw-toggle",
          attrs: { type: "checkbox", "data-kind": kind, "data-target": path, disabled: !node },
        });
        return h("label", { cls: "hw-toggle-label" }, [input, h("span", { text: kind })]);
      }),
    );
    syncToggles();
  }

  /** Checked state from `hooks`; pending kinds keep the user's click but stay disabled. */
  function syncToggles() {
    const hookIndex = indexHooks(model.get("hooks"));
    const path = selectedPath();
    for (const input of toggles.querySelectorAll("input.hw-toggle")) {
      const kind = input.getAttribute("data-kind");
      const waiting = pending.has(`${path}\u0000${kind}`);
      if (!waiting) input.checked = hasHook(hookIndex, path, kind);
      input.disabled = waiting || !selectedNode();
      input.closest("label")?.classList.toggle("hw-pending", waiting);
    }
  }

  function renderHookList() {
    const path = selectedPath();
    const hooks = hooksAt(indexHooks(model.get("hooks")), path);
    hookList.replaceChildren(
      ...hooks.map((hook) => {
        const parts = [
          h("span", { cls: "hw-hook-kind", attrs: { "data-kind": hook.kind }, text: hook.kind }),
          h("span", { cls: "hw-hook-action", text: hook.action ?? "" }),
          h("span", {
            cls: "hw-hook-fired",
            attrs: { title: formatFired(hook.fired) },
            text: `${formatCount(hook.fired ?? 0)}×`,
          }),
        ];
        // Notes say why a hook stays silent (no_grad, a dict output, a compiled model).
        if (hook.note) parts.push(h("div", { cls: "hw-hook-note", text: hook.note }));
        if (hook.error) parts.push(h("pre", { cls: "hw-hook-error", text: hook.error }));
        return h("li", { cls: hook.error ? "hw-hook hw-hook-failed" : "hw-hook" }, parts);
      }),
    );
  }

  function clearPending() {
    pending.clear();
    if (pendingTimer !== null) clearTimeout(pendingTimer);
    pendingTimer = null;
  }

  function onSelectionOrTree() {
    const node = selectedNode();
    const path = selectedPath();
    renderInfo(node, path);
    renderToggles(node, path);
    renderHookList();
  }

  function onHooks() {
    clearPending();
    syncToggles();
    renderHookList();
  }

  function onError() {
    // A failed attach/detach leaves `hooks` unchanged; the error means the answer has come.
    if (model.get("error")) {
      clearPending();
      syncToggles();
    }
  }

  function onToggle(event) {
    const input = event.target;
    if (!input.matches?.("input.hw-toggle")) return;
    const kind = input.getAttribute("data-kind");
    const target = input.getAttribute("data-target");
    pending.add(`${target}\u0000${kind}`);
    if (pendingTimer !== null) clearTimeout(pendingTimer);
    pendingTimer = setTimeout(() => {
      clearPending();
      syncToggles();
    }, PENDING_TIMEOUT_MS);
    syncToggles();
    model.send({ kind: input.checked ? "attach" : "detach", target, hook: kind });
  }

  const offs = [
    subscribe(model, ["change:selected", "change:tree", "change:hook_kinds"], onSelectionOrTree),
    subscribe(model, ["change:hooks"], onHooks),
    subscribe(model, ["change:error"], onError),
    listen(toggles, "change", onToggle),
  ];
  onSelectionOrTree();
  return {
    el,
    destroy() {
      offs.forEach((off) => off());
      clearPending();
      plots.destroy();
    },
  };
}
