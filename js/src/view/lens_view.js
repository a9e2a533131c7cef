/** Logit-lens panel: each block's residual read as next-token predictions, a layers × positions table. */

import { displayPath } from "../format.js";
import { lensReadout } from "../readout.js";
import { parseRgb, probabilityColors } from "../scores.js";
import { h, listen, onThemeChange, setText, subscribe } from "./dom.js";

/** @param {unknown} prob */
const percent = (prob) => (Number.isFinite(Number(prob)) ? `${(Number(prob) * 100).toFixed(1)}%` : String(prob));

/**
 * Build the lens panel for `model` (hidden where the model has no lens), sending through `requests`.
 * @param {import("../widget_model.js").WidgetModel} model
 * @param {import("../widget_model.js").Requests} requests
 */
export function createLensView(model, requests) {
  const read = h("button", {
    cls: "hw-lens-run",
    attrs: {
      type: "button",
      title: "Run the example input once and read every block's output through the final norm and the unembedding",
    },
    text: "Read the logit lens",
  });
  const caption = h("div", { cls: "hw-hint hw-lens-caption" });
  const error = h("div", { cls: "hw-attr-error hw-lens-error", attrs: { role: "alert" } });
  const table = h("table", { cls: "hw-lens-table" });
  const line = h("div", { cls: "hw-readout hw-lens-readout", attrs: { "aria-live": "polite" } });
  const el = h("details", { cls: "hw-lens-panel", attrs: { open: true, hidden: true } }, [
    h("summary", { cls: "hw-section-title", text: "Logit lens: what each block predicts next" }),
    h("div", { cls: "hw-summary-bar" }, [read]),
    error,
    caption,
    h("div", { cls: "hw-lens-box" }, [table]),
    line,
  ]);

  /**
   * A cell of the table: its top token and probability shown, every `[token, probability]` in its tooltip.
   * @param {unknown[][]} entries
   * @param {import("../scores.js").Rgb} base
   */
  function cell(entries, base) {
    const [top, prob] = entries[0] ?? ["", 0];
    const colors = probabilityColors(prob, base);
    const td = h(
      "td",
      {
        cls: "hw-lens-cell",
        attrs: { title: entries.map(([label, p]) => `${label}  ${percent(p)}`).join("\n"), "data-prob": String(prob) },
      },
      [h("span", { cls: "hw-lens-token", text: top }), h("span", { cls: "hw-lens-prob", text: percent(prob) })],
    );
    td.style.background = colors.background;
    td.style.color = colors.color;
    return td;
  }

  /**
   * Say what the cell under the mouse holds in the readout line (no kernel round trip).
   * @param {Event} event
   */
  function onOver(event) {
    const td = /** @type {Element} */ (event.target).closest?.("td.hw-lens-cell");
    const tr = td?.parentElement;
    if (!td || !tr) return;
    const lens = model.get("lens") ?? {};
    const row = [...(tr.parentElement?.children ?? [])].indexOf(tr);
    const col = [...tr.children].indexOf(td) - 1; // the first is the layer's name
    const [top, prob] = lens.cells?.[row]?.[col] ?? [];
    if (row < 0 || col < 0 || top === undefined) return;
    const probability = Number(prob);
    setText(line, lensReadout({
      layer: row,
      layerName: displayPath(lens.layers?.[row] ?? ""),
      position: (Number(lens.first) || 0) + col,
      token: String(lens.positions?.[col] ?? ""),
      top: String(top),
      probability,
    }));
    line.setAttribute("data-row", String(row));
    line.setAttribute("data-col", String(col));
    line.setAttribute("data-value", String(probability));
  }

  function update() {
    const lens = model.get("lens") ?? {};
    setText(line, "");
    el.hidden = !lens.available;
    setText(error, lens.error ?? "");
    setText(caption, lens.caption ?? "");
    const layers = lens.layers ?? [];
    if (layers.length === 0) {
      table.replaceChildren();
      return;
    }
    const base = parseRgb(getComputedStyle(el.closest(".hw-explorer") ?? el).backgroundColor);
    const first = Number(lens.first) || 0;
    const head = h("tr", {}, [
      h("th", { text: "layer \\ position" }),
      ...(lens.positions ?? []).map((label, i) =>
        h("th", { attrs: { title: `position ${first + i}` }, text: label }),
      ),
    ]);
    const rows = layers.map((layer, r) =>
      h("tr", { attrs: { "data-layer": layer } }, [
        h("th", { text: displayPath(layer) }),
        ...(lens.cells?.[r] ?? []).map((entries) => cell(entries, base)),
      ]),
    );
    table.replaceChildren(h("thead", {}, [head]), h("tbody", {}, rows));
  }

  const offs = [
    subscribe(model, ["change:lens"], update),
    listen(read, "click", () => requests.send({ type: "lens", top_k: 5 })),
    listen(table, "mouseover", onOver),
    onThemeChange(update), // the cells' colours start from the page's background
  ];
  update();
  return { el, destroy: () => offs.forEach((off) => off()) };
}
