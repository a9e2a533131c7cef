/** Logit-lens panel: each block's residual read as next-token predictions, a layers × positions table. */

import { displayPath } from "../format.js";
import { formatValue, lensReadout } from "../readout.js";
import { formatProbability, parseRgb, probabilityColors } from "../scores.js";
import { h, listen, onThemeChange, setText, subscribe } from "./dom.js";
import { createEditsNote } from "./edits_note.js";

/**
 * One top token of a cell's tooltip: `" the"  43.1%  log p -0.8412`.
 * @param {unknown[]} entry
 */
const tipLine = ([label, p]) => {
  const value = Number(p);
  return `${label}  ${formatProbability(p)}${value > 0 ? `  log p ${formatValue(Math.log(value))}` : ""}`;
};

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
  const note = createEditsNote();
  const box = h("div", { cls: "hw-lens-box" }, [table]);
  const el = h("details", { cls: "hw-lens-panel", attrs: { open: true, hidden: true } }, [
    h("summary", { cls: "hw-section-title", text: "Logit lens: what each block predicts next" }),
    h("div", { cls: "hw-summary-bar" }, [read]),
    error,
    caption,
    note.el,
    box,
    line,
  ]);

  /**
   * A cell of the table: its top token and probability shown, coloured by that probability (log scale from `floor`),
   * every top token with its log-probability and the final answer's rank in its tooltip; `first`: the final answer
   * becomes the top token here first (outlined).
   * @param {unknown[][]} entries
   * @param {import("../scores.js").Rgb} base
   * @param {number} floor
   * @param {{answer: string, rank: number, prob: number, first: boolean} | null} final
   */
  function cell(entries, base, floor, final) {
    const [top, prob] = entries[0] ?? ["", 0];
    const colors = probabilityColors(prob, base, floor);
    const tip = entries.map(tipLine);
    if (final) {
      const rank = final.rank === 1 ? "top-1" : `rank ${final.rank}, ${formatProbability(final.prob)}`;
      tip.push(`final answer "${final.answer}": ${rank}${final.first ? " (first top-1 here)" : ""}`);
    }
    const td = h(
      "td",
      {
        cls: final?.first ? "hw-lens-cell hw-lens-first" : "hw-lens-cell",
        attrs: { title: tip.join("\n"), "data-prob": String(prob) },
      },
      [h("span", { cls: "hw-lens-token", text: top }), h("span", { cls: "hw-lens-prob", text: formatProbability(prob) })],
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
    const [top, prob] = lens.cells?.[row]?.[col]?.[0] ?? []; // the cell's likeliest token
    if (row < 0 || col < 0 || top === undefined) return;
    const probability = Number(prob);
    const answer = lens.answers?.[col];
    setText(line, lensReadout({
      layer: row,
      layerName: displayPath(lens.layers?.[row] ?? ""),
      position: (Number(lens.first) || 0) + col,
      token: String(lens.positions?.[col] ?? ""),
      top: String(top),
      probability,
      ...(answer === undefined
        ? {}
        : {
            answer: String(answer),
            answerRank: Number(lens.answer_ranks?.[row]?.[col]),
            answerProb: Number(lens.answer_probs?.[row]?.[col]),
          }),
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
    note.set(lens.edits);
    const layers = lens.layers ?? [];
    if (layers.length === 0) {
      table.replaceChildren();
      return;
    }
    const base = parseRgb(getComputedStyle(el.closest(".hw-explorer") ?? el).backgroundColor);
    const first = Number(lens.first) || 0;
    const floor = Number(lens.floor) || 0;
    /** @param {number} r @param {number} t */
    const final = (r, t) =>
      lens.answers?.[t] === undefined
        ? null
        : {
            answer: String(lens.answers[t]),
            rank: Number(lens.answer_ranks?.[r]?.[t]),
            prob: Number(lens.answer_probs?.[r]?.[t]),
            first: lens.answer_first?.[t] === r,
          };
    const head = h("tr", {}, [
      h("th", { text: "layer \\ position" }),
      ...(lens.positions ?? []).map((label, i) =>
        h("th", { attrs: { title: `position ${first + i}` }, text: label }),
      ),
    ]);
    const rows = layers.map((layer, r) =>
      h("tr", { attrs: { "data-layer": layer } }, [
        h("th", { text: displayPath(layer) }),
        ...(lens.cells?.[r] ?? []).map((entries, t) => cell(entries, base, floor, final(r, t))),
      ]),
    );
    table.replaceChildren(h("thead", {}, [head]), h("tbody", {}, rows));
    // the last position is the one a language model is read at: in view, whatever the table's width (now, and
    // once laid out if the panel was not yet)
    const toEnd = () => {
      box.scrollLeft = box.scrollWidth;
    };
    toEnd();
    requestAnimationFrame(toEnd);
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
