/** What the attribution panel shows of its last result while a module is selected; pure, no DOM. */

import { displayPath } from "./format.js";

/**
 * The last result as shown while `selected` is selected. It stays whatever is selected: a token method or a rollout
 * explains the input, not the selection; a CAM keeps its layer and names the selection beside it ("gradcam of class 3
 * at layer4 (selected: fc)"). An error is shown at the module it was asked for only.
 * @param {Partial<import("./payloads.js").Attribution> | null | undefined} result
 * @param {string} selected
 * @returns {{ok: boolean, error: string, caption: string}}
 */
export function attributionShown(result, selected) {
  const asked = Boolean(result?.method);
  const here = asked && result?.layer === selected;
  const ok = asked && !result?.error;
  const elsewhere = ok && result?.of_layer === true && !here;
  const caption = ok ? `${result?.caption ?? ""}${elsewhere ? ` (selected: ${displayPath(selected)})` : ""}` : "";
  return { ok, error: here ? (result?.error ?? "") : "", caption };
}
