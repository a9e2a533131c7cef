/** Error box: the `error` traitlet, the explorer's own traceback frames folded, the failing module named (a click
 * selects it), hidden when empty, with a dismiss button. */

import { displayPath } from "../format.js";
import { foldTraceback } from "../traceback.js";
import { h, listen, setText, subscribe } from "./dom.js";
import "./states.css";

/**
 * Fill `pre` with the traceback `text`: each run of the explorer's own frames in a `details` that unfolds it.
 * @param {HTMLElement} pre
 * @param {string | null | undefined} text
 */
export function fillTraceback(pre, text) {
  const parts = foldTraceback(text).map((segment, i, all) => {
    const end = i < all.length - 1 ? "\n" : "";
    if (!segment.folded) {
      const node = h("span", { cls: "hw-trace-user" });
      setText(node, segment.text + end);
      return node;
    }
    const frames = segment.frames === 1 ? "1 frame" : `${segment.frames} frames`;
    const body = h("span", { cls: "hw-trace-own-text" });
    setText(body, segment.text + end);
    return h("details", { cls: "hw-trace-own" }, [h("summary", { text: `… ${frames} of ${segment.label}` }), body]);
  });
  pre.replaceChildren(...parts);
}

/**
 * Build the error box for `model`, sending through `requests`; returns {el, destroy}.
 * @param {import("../widget_model.js").WidgetModel} model
 * @param {import("../widget_model.js").Requests} requests
 */
export function createErrorBox(model, requests) {
  const text = h("pre", { cls: "hw-error-text" });
  const failed = h("button", {
    cls: "hw-error-module",
    attrs: { type: "button", hidden: true, title: "Select the module the run failed in" },
  });
  const dismiss = h("button", {
    cls: "hw-error-dismiss",
    attrs: { type: "button", title: "Dismiss", "aria-label": "Dismiss error" },
    text: "×",
  });
  const el = h("div", { cls: "hw-error", attrs: { role: "alert" } }, [dismiss, failed, text]);
  /** @type {string | null} */
  let shown = null;

  /** The module the latest Run failed in (`status.failed`), or null. */
  function failedPath() {
    const path = model.get("status")?.failed;
    return typeof path === "string" ? path : null;
  }

  function update() {
    const error = model.get("error") || "";
    if (error !== shown) fillTraceback(text, error); // a status push alone keeps the folds as the user left them
    shown = error;
    el.hidden = error === "";
    const path = failedPath();
    failed.hidden = path === null || error === "";
    setText(failed, path === null ? "" : `Failed in ${path === "" ? "(model)" : displayPath(path)}: select it`);
    if (path !== null) failed.setAttribute("data-path", path);
    else failed.removeAttribute("data-path");
  }

  function onFailedClick() {
    const path = failedPath();
    if (path === null) return;
    model.set("selected", path);
    model.save_changes();
  }

  const offs = [
    subscribe(model, ["change:error", "change:status"], update),
    listen(dismiss, "click", () => requests.send({ type: "dismiss_error" })),
    listen(failed, "click", onFailedClick),
  ];
  update();
  return { el, destroy: () => offs.forEach((off) => off()) };
}
