/** Inspector: details, hook toggles with action and edit pickers, live hooks, code and plots of the selection (its
 * attribution has a tab of its own). */

import { displayName, displayPath, formatCount, formatFired, formatParams, formatShape } from "../format.js";
import { hasHook, hooksAt, indexHooks } from "../hooks.js";
import { groupKinds, kindTitle } from "../kinds.js";
import { busyText } from "../live_state.js";
import { SLOW_MS } from "../requests.js";
import { findNode, isTree } from "../tree.js";
import { h, listen, setText, subscribe } from "./dom.js";
import { createEditPicker } from "./edit_picker.js";
import { fillTraceback } from "./error_box.js";
import { createPlots } from "./plots.js";

/** @type {Record<string, string>} */
const FAMILY_LABELS = { module: "Module", param: "Parameter", node: "Autograd node" };

/**
 * Build the inspector for `model`, sending through `requests`; returns {el, destroy}.
 * @param {import("../widget_model.js").WidgetModel} model
 * @param {import("../widget_model.js").Requests} requests
 */
export function createInspector(model, requests) {
  const info = h("dl", { cls: "hw-info" });
  const params = h("div", { cls: "hw-params-list" });
  const picker = createEditPicker({ onChange: onPickerChange });
  const toggles = h("div", { cls: "hw-toggles", attrs: { role: "group", "aria-label": "Hooks" } });
  const kernelWait = h("div", {
    cls: "hw-kernel-wait",
    attrs: { role: "status", hidden: true },
    text: "No answer from the kernel yet: it is busy running a cell, or it is gone.",
  });
  const busy = h("div", { cls: "hw-kernel-busy", attrs: { role: "status", hidden: true } });
  const hookList = h("ul", { cls: "hw-hook-list" });
  const codeText = h("pre", { cls: "hw-code-text" });
  const code = h("details", { cls: "hw-code" }, [h("summary", { text: "Plain-torch code for these hooks" }), codeText]);
  const plots = createPlots(model, requests);
  const diagnostics = h("ul", { cls: "hw-diagnostics" });
  const diagnosticsBox = h("details", { cls: "hw-diagnostics-box", attrs: { open: true } }, [
    h("summary", { cls: "hw-section-title", text: "What the explorer did" }),
    diagnostics,
  ]);
  const el = h("div", { cls: "hw-inspector" }, [
    diagnosticsBox,
    info,
    params,
    h("div", { cls: "hw-section-title", text: "Hooks" }),
    picker.el,
    toggles,
    busy,
    kernelWait,
    hookList,
    code,
    h("div", { cls: "hw-section-title", text: "Captures" }),
    plots.el,
  ]);
  // Toggles whose attach/detach was sent and not yet answered (`path\0kind` -> the timer that marks it slow):
  // their checkboxes stay disabled until the kernel's reply, however long that takes.
  /** @type {Map<string, ReturnType<typeof setTimeout>>} */
  const pending = new Map();
  /** @type {string | null} */
  let loadedFor = null; // the path whose hook the picker last showed
  /** @type {Set<string>} */
  const slow = new Set();
  let destroyed = false;

  const selectedPath = () => {
    const value = model.get("selected");
    return typeof value === "string" ? value : "";
  };
  /** The selection payload, if it describes the current selection (Python answers a click shortly after). */
  const selection = () => {
    const value = model.get("selection") ?? {};
    return value.path === selectedPath() ? value : null;
  };

  function renderInfo() {
    const path = selectedPath();
    const sel = selection();
    const family = sel?.family ?? "module";
    const entries = [[FAMILY_LABELS[family] ?? "Target", displayPath(path)]];
    const tree = model.get("tree");
    const node = family === "module" && isTree(tree) ? findNode(tree, path) : null;
    if (node) {
      const dtype = node.dtype ? ` ${node.dtype}` : "";
      entries.push(["Class", displayName(node.cls ?? "")]);
      entries.push(["Output", `${formatShape(node.shape)}${dtype}`]);
      entries.push(["Parameters", formatParams(node.trainable, node.frozen, node.packed)]);
    } else if (sel) {
      for (const [term, value] of sel.details ?? []) entries.push([term, value]);
    }
    if (sel?.problem) entries.push(["", sel.problem]);
    // Busy until Python's answer for this path arrives: the kinds and edits shown until then are the last path's.
    info.setAttribute("aria-busy", String(sel === null));
    info.replaceChildren(
      ...entries.flatMap(([term, value]) => [h("dt", { text: term }), h("dd", { text: value })]),
    );
    params.replaceChildren(
      ...(sel?.params ?? []).map((param) =>
        h("button", {
          cls: "hw-param",
          attrs: {
            type: "button",
            "data-path": param.path,
            title: `select ${displayName(param.path)} (${param.trainable ? "trainable" : "frozen"}) to hook its gradient`,
          },
          text: `${displayName(param.name)} ${formatShape(param.shape)}`,
        }),
      ),
    );
    setText(codeText, sel?.code ?? "");
    code.hidden = !sel?.code;
  }

  function renderToggles() {
    const path = selectedPath();
    const sel = selection();
    const kinds = sel?.kinds ?? [];
    const table = model.get("hook_kinds");
    const groups = groupKinds(table, kinds, sel?.family);
    const order = [...groups.common, ...groups.more];
    const shown = [...toggles.querySelectorAll("input.hw-toggle")];
    const same =
      shown.length === order.length &&
      shown.every((input, i) => input.getAttribute("data-kind") === order[i] && input.getAttribute("data-path") === path);
    if (same && kinds.length > 0) {
      // The same toggles (a hook's code changed the selection payload): kept, so focus and a pending click stay put.
      syncToggles();
      return;
    }
    /** @param {string} kind */
    const toggle = (kind) => {
      const input = h("input", {
        cls: "hw-toggle",
        attrs: { type: "checkbox", "data-kind": kind, "data-path": path },
      });
      const title = kindTitle(table, kind, sel?.family);
      return h("label", { cls: "hw-toggle-label", attrs: { title } }, [input, h("span", { text: kind })]);
    };
    // The common kinds (a module's output and its gradient) first; the rest one click away, open when one is on.
    const hookIndex = indexHooks(model.get("hooks"));
    const more = groups.more.length
      ? h("details", { cls: "hw-more-kinds", attrs: { open: groups.more.some((kind) => hasHook(hookIndex, path, kind)) } }, [
          h("summary", { text: `More kinds (${groups.more.length})` }),
          h("div", { cls: "hw-more-kinds-list" }, groups.more.map(toggle)),
        ])
      : null;
    toggles.replaceChildren(...groups.common.map(toggle), ...(more ? [more] : []));
    // No payload yet: the kernel has not answered (a running cell holds it), which is not "no hook fits".
    if (sel && kinds.length === 0) toggles.append(h("span", { cls: "hw-hint", text: "No hook can be attached here." }));
    syncToggles();
  }

  /** Checked state from `hooks`; pending kinds keep the user's click but stay disabled. */
  function syncToggles() {
    const hookIndex = indexHooks(model.get("hooks"));
    const path = selectedPath();
    for (const input of /** @type {NodeListOf<HTMLInputElement>} */ (toggles.querySelectorAll("input.hw-toggle"))) {
      const kind = input.getAttribute("data-kind");
      const waiting = pending.has(`${path}\u0000${kind}`);
      if (!waiting) input.checked = hasHook(hookIndex, path, kind);
      input.disabled = waiting;
      input.closest("label")?.classList.toggle("hw-pending", waiting);
    }
    kernelWait.hidden = slow.size === 0;
  }

  function renderHookList() {
    const hooks = hooksAt(indexHooks(model.get("hooks")), selectedPath());
    hookList.replaceChildren(
      ...hooks.map((hook) => {
        const edit = Array.isArray(hook.edit) && hook.edit.length > 0 ? ` + ${hook.edit.map((e) => e.join(" ")).join(", ")}` : "";
        const parts = [
          h("span", { cls: "hw-hook-kind", attrs: { "data-kind": hook.kind }, text: hook.kind }),
          h("span", { cls: "hw-hook-action", text: hook.foreign ? `${displayName(hook.action)} (someone else's; left alone)` : `${displayName(hook.action ?? "")}${edit}` }),
        ];
        if (!hook.foreign) {
          parts.push(
            h("span", {
              cls: "hw-hook-fired",
              attrs: { title: formatFired(hook.fired) },
              text: `${formatCount(hook.fired ?? 0)}×`,
            }),
          );
        }
        // Notes say why a hook stays silent (no_grad, a dict output, a compiled model, a missing node).
        if (hook.note) parts.push(h("div", { cls: "hw-hook-note", text: hook.note }));
        if (hook.error) {
          const lines = String(hook.error).trim().split("\n");
          const trace = h("pre", { cls: "hw-hook-trace" });
          fillTraceback(trace, hook.error); // the user's frames first, the explorer's folded
          parts.push(h("details", { cls: "hw-hook-error" }, [h("summary", { text: lines[lines.length - 1] }), trace]));
        }
        const cls = ["hw-hook", hook.error ? "hw-hook-failed" : "", hook.foreign ? "hw-hook-foreign" : ""];
        return h("li", { cls: cls.filter(Boolean).join(" ") }, parts);
      }),
    );
  }

  function onSelection() {
    const path = selectedPath();
    const tree = model.get("tree");
    const node = isTree(tree) ? findNode(tree, path) : null;
    const sel = selection();
    picker.update(path, sel, node?.shape ?? null);
    if (sel && loadedFor !== path) {
      // A newly selected path's hook shows its action and edit: a change of one field keeps the others.
      loadedFor = path;
      const own = reattachable(path)[0];
      if (own) picker.load(own);
    }
    renderInfo();
    renderToggles();
    renderHookList();
    renderBusy();
  }

  function onHooks() {
    syncToggles();
    renderHookList();
  }

  function renderBusy() {
    const text = busyText(model.get("status"), selection() !== null);
    busy.hidden = text === null;
    setText(busy, text ?? "");
  }

  /**
   * The hooks at `path` a reattach changes: attached from the page or Python, not others', not the global kinds.
   * @param {string} path
   */
  function reattachable(path) {
    return hooksAt(indexHooks(model.get("hooks")), path).filter(
      (hook) => !hook.foreign && !String(hook.kind).startsWith("global_"),
    );
  }

  /** The action or edit changed while hooks are attached here: they get it at once (one reattach message). */
  function onPickerChange() {
    const path = selectedPath();
    if (reattachable(path).length === 0) return; // the next toggle attaches with the new choice
    const choice = picker.value();
    if (choice.error) return; // the picker says what is wrong; the hooks keep what they had
    requests.send({ type: "reattach", path, action: choice.action, edit: choice.edit }).then((answer) => {
      if (!destroyed && path === selectedPath()) picker.showProblem(answer.ok ? "" : answer.error);
    });
  }

  /** @param {Event} event */
  function onToggle(event) {
    const input = /** @type {HTMLInputElement} */ (event.target);
    if (!input.matches?.("input.hw-toggle")) return;
    const kind = /** @type {string} */ (input.getAttribute("data-kind"));
    const path = /** @type {string} */ (input.getAttribute("data-path"));
    const attaching = input.checked;
    const choice = attaching ? picker.value() : null;
    if (choice?.error) {
      input.checked = false; // the picker says what is wrong; nothing is sent
      return;
    }
    const key = `${path}\u0000${kind}`;
    /** @type {import("../widget_model.js").Request} */
    const message = choice
      ? { type: "attach", path, kind, action: choice.action, edit: choice.edit }
      : { type: "detach", path, kind };
    pending.set(
      key,
      setTimeout(() => {
        slow.add(key); // still pending: the page says the kernel has not answered
        syncToggles();
      }, SLOW_MS),
    );
    syncToggles();
    requests.send(message).then((answer) => {
      // The reply, success or error, comes after the `hooks` it changed: the checkbox shows them now.
      clearTimeout(pending.get(key));
      pending.delete(key);
      slow.delete(key);
      if (destroyed) return;
      syncToggles();
      // An attach refused (a record gone, a shape that does not fit) is said beside the edit it was about, while
      // that path stays selected.
      if (attaching && path === selectedPath()) picker.showProblem(answer.ok ? "" : answer.error);
    });
  }

  function onDiagnostics() {
    // The engine's own explanations (a hook it detached, and why) stay in view until the user reads them.
    const notes = model.get("diagnostics") ?? [];
    diagnostics.replaceChildren(...notes.map((note) => h("li", { cls: "hw-diagnostic", text: note })));
    diagnosticsBox.hidden = notes.length === 0;
  }

  /** @param {MouseEvent} event */
  function onParamClick(event) {
    const button = /** @type {Element} */ (event.target).closest?.("button.hw-param");
    if (!button) return;
    model.set("selected", /** @type {string} */ (button.getAttribute("data-path")));
    model.save_changes();
  }

  const offs = [
    subscribe(model, ["change:selected", "change:tree", "change:selection"], onSelection),
    subscribe(model, ["change:hooks"], onHooks),
    subscribe(model, ["change:diagnostics"], onDiagnostics),
    subscribe(model, ["change:status"], renderBusy),
    listen(toggles, "change", onToggle),
    listen(params, "click", onParamClick),
  ];
  onSelection();
  onDiagnostics();
  return {
    el,
    destroy() {
      destroyed = true;
      offs.forEach((off) => off());
      for (const timer of pending.values()) clearTimeout(timer);
      picker.destroy();
      plots.destroy();
    },
  };
}
