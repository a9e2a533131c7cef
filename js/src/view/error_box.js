/** Error box: the `error` traitlet as preformatted text, hidden when empty, with a dismiss button. */

import { h, listen, setText, subscribe } from "./dom.js";

/** Build the error box for `model`, sending through `requests`; returns {el, destroy}. */
export function createErrorBox(model, requests) {
  const text = h("pre", { cls: "hw-error-text" });
  const dismiss = h("button", {
    cls: "hw-error-dismiss",
    attrs: { type: "button", title: "Dismiss", "aria-label": "Dismiss error" },
    text: "×",
  });
  const el = h("div", { cls: "hw-error", attrs: { role: "alert" } }, [dismiss, text]);

  function update() {
    const error = model.get("error") || "";
    setText(text, error);
    el.hidden = error === "";
  }

  const offs = [
    subscribe(model, ["change:error"], update),
    listen(dismiss, "click", () => requests.send({ type: "dismiss_error" })),
  ];
  update();
  return { el, destroy: () => offs.forEach((off) => off()) };
}
