/** "Attribution here": the methods that fit the selection, a target picker, and the result: a map over the input
 * image, or the input tokens coloured by their scores. */

import { attributionShown } from "../attribution.js";
import { formatScore, isSigned, parseRgb, scoreColors, scoreScale } from "../scores.js";
import { positionField, runChoice, targetOptions } from "../targets.js";
import { h, listen, onThemeChange, pngUrls, setAttr, setText, subscribe } from "./dom.js";
import { createEditsNote } from "./edits_note.js";
import { createFigure } from "./readout_view.js";

/**
 * Build the attribution section for `model`, sending through `requests`; returns {el, destroy}.
 * @param {import("../widget_model.js").WidgetModel} model
 * @param {import("../widget_model.js").Requests} requests
 */
export function createAttributionView(model, requests) {
  const method = h("select", { cls: "hw-attr-method", attrs: { "aria-label": "Attribution method" } });
  const target = h("select", { cls: "hw-attr-target", attrs: { "aria-label": "Score to explain" } });
  const position = h("input", {
    cls: "hw-attr-position",
    attrs: { type: "number", step: "1", placeholder: "default", "aria-label": "Attribution position", hidden: true },
  });
  const run = h("button", { cls: "hw-attr-run", attrs: { type: "button" }, text: "Attribution here" });
  const hint = h("div", { cls: "hw-hint hw-attr-hint" });
  const caption = h("div", { cls: "hw-plot-caption" });
  const error = h("div", { cls: "hw-attr-error", attrs: { role: "alert" } });
  const note = h("div", { cls: "hw-attr-note", attrs: { role: "status" } });
  const edits = createEditsNote();
  const input = createFigure({ cls: "hw-attr-input hw-plot", figure: "attribution-input", alt: "the input image" });
  const image = createFigure({ cls: "hw-attr-image hw-plot", figure: "attribution", alt: "attribution over the input" });
  const tokens = h("div", { cls: "hw-token-row hw-attr-tokens", attrs: { hidden: true, "aria-label": "tokens coloured by score" } });
  const legend = h("div", { cls: "hw-hint hw-attr-legend", attrs: { hidden: true } });
  const picker = h("div", { cls: "hw-picker" }, [method, target, position, run]);
  const el = h("div", { cls: "hw-attribution" }, [
    h("div", { cls: "hw-section-title", text: "Attribution" }),
    picker,
    hint,
    error,
    edits.el,
    caption,
    note,
    tokens,
    legend,
    h("div", { cls: "hw-attr-images" }, [input.el, image.el]), // the input beside its map
  ]);
  const images = pngUrls();
  /** @type {import("../targets.js").PositionField} */
  let field = { shown: false };

  const selection = () => {
    const value = model.get("selection") ?? {};
    return value.path === model.get("selected") ? value : null;
  };

  function updateTargets() {
    // The run bar's targets, in the same words (top class or class k, named by id2label; "loss" where there is one).
    const status = model.get("status") ?? {};
    const chosen = target.value;
    const options = targetOptions(status, status.output?.labels ?? null);
    target.replaceChildren(...options.map((o) => h("option", { attrs: { value: o.value }, text: o.text })));
    target.value = options.some((o) => o.value === chosen) ? chosen : options[0].value;
    field = positionField(status);
    position.hidden = !field.shown;
    if (field.shown) {
      setAttr(position, "min", String(field.min));
      setAttr(position, "max", String(field.max));
      setAttr(position, "title", `${field.title}; empty: the method's default (a rollout: the [CLS] row, or the last)`);
    }
  }

  function updateMethods() {
    // Only the methods that fit the selected module and the example inputs (no Grad-CAM on a text model's layer).
    const sel = selection();
    const methods = sel?.attribution_methods ?? [];
    const chosen = method.value;
    method.replaceChildren(
      ...methods.map((m) => {
        const words = sel?.attribution_words?.[m]; // the name in words and its tip; the id is what the kernel takes
        const title = words ? `${words.name}: ${words.tip}` : m;
        return h("option", { attrs: { value: m, title }, text: words?.name ?? m });
      }),
    );
    if (methods.includes(chosen)) method.value = chosen;
    method.disabled = methods.length === 0;
    run.disabled = methods.length === 0;
    setText(hint, sel?.attribution_note ?? "");
    hint.hidden = !sel?.attribution_note;
  }

  /** @param {import("../payloads.js").TokenScore[]} items */
  function renderTokens(items) {
    const scores = items.map((t) => t.score);
    const scale = scoreScale(scores);
    const base = parseRgb(getComputedStyle(el.closest(".hw-explorer") ?? el).backgroundColor);
    tokens.replaceChildren(
      ...items.map((item) => {
        const colors = scoreColors(item.score, scale, base);
        const span = h("span", {
          cls: colors.background === null ? "hw-token hw-token-nonfinite" : "hw-token",
          attrs: { "data-score": String(item.score), title: `${item.text}: ${formatScore(item.score)}` },
          text: item.text,
        });
        if (colors.background !== null) {
          span.style.background = colors.background;
          span.style.color = colors.color;
        }
        return span;
      }),
    );
    const signed = isSigned(scores);
    const strongest = `strongest |score| ${formatScore(scale)}`;
    const text =
      scale === 0
        ? "every score is 0: the tokens are left uncoloured"
        : signed
          ? `red raises the score, blue lowers it; ${strongest}`
          : `darker: more relevant; ${strongest}`;
    setText(legend, text);
  }

  function updateResult() {
    const result = model.get("attribution") ?? {};
    // The result stays across selections (a CAM names its layer and the selection); an error, at its module only.
    const shown = attributionShown(result, model.get("selected") ?? "");
    const ok = shown.ok;
    setText(error, shown.error);
    setText(caption, shown.caption);
    setText(note, ok ? (result.note ?? "") : ""); // e.g. why the map is blank
    edits.set(ok ? result.edits : "");
    images.revoke();
    image.show(images, ok ? result.png : null, ok ? result.hover : null);
    input.show(images, ok ? result.input_png : null, ok ? result.input_hover : null);
    const items = ok && Array.isArray(result.tokens) ? result.tokens : null;
    tokens.hidden = items === null;
    legend.hidden = items === null;
    if (items) renderTokens(items);
    else tokens.replaceChildren();
  }

  function updateVisible() {
    // Modules only: parameters and autograd nodes have nothing to attribute; a result kept from a module stays shown.
    const sel = model.get("selection") ?? {};
    const kept = Boolean(model.get("attribution")?.method);
    el.hidden = sel.family !== "module" && !kept;
    picker.hidden = sel.family !== "module";
    updateMethods();
    updateResult();
  }

  function onRun() {
    const chosen = runChoice(target.value, position.value, field);
    requests.send({
      type: "attribute",
      layer: model.get("selected"),
      method: method.value,
      target: chosen.target,
      position: chosen.position,
    });
  }

  const offs = [
    subscribe(model, ["change:status"], updateTargets),
    subscribe(model, ["change:attribution"], updateVisible),
    subscribe(model, ["change:selection", "change:selected"], updateVisible),
    listen(run, "click", onRun),
    onThemeChange(updateResult), // the tokens' colours start from the page's background
  ];
  updateTargets();
  updateVisible();
  return {
    el,
    destroy() {
      offs.forEach((off) => off());
      images.revoke();
    },
  };
}
