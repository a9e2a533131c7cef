/** The one line above an analysis's result saying whether it ran with the user's edits (payload field `edits`). */

import { h, setText } from "./dom.js";

/** A `.hw-edits-note` line, hidden while its text is empty; `set(text)` shows a result's `edits`. */
export function createEditsNote() {
  const el = h("div", { cls: "hw-edits-note", attrs: { hidden: true } });
  /** @param {unknown} text */
  const set = (text) => {
    const said = typeof text === "string" ? text : "";
    setText(el, said);
    el.hidden = !said;
  };
  return { el, set };
}
