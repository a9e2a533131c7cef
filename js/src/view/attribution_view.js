/** "Attribution here": a method and class picker for the selected layer, and the map over the input image. */

import { targetOptions } from "../targets.js";
import { h, listen, pngUrls, setText, subscribe } from "./dom.js";

const METHODS = [
  "gradcam",
  "gradcam++",
  "hirescam",
  "xgradcam",
  "layercam",
  "guided_gradcam",
  "saliency",
  "input_x_grad",
  "guided_backprop",
];

/** Build the attribution section for `model`, sending through `requests`; returns {el, destroy}. */
export function createAttributionView(model, requests) {
  const method = h(
    "select",
    { cls: "hw-attr-method", attrs: { "aria-label": "Attribution method" } },
    METHODS.map((m) => h("option", { attrs: { value: m }, text: m })),
  );
  const target = h("select", { cls: "hw-attr-target", attrs: { "aria-label": "Class to explain" } });
  const run = h("button", { cls: "hw-attr-run", attrs: { type: "button" }, text: "Attribution here" });
  const caption = h("div", { cls: "hw-plot-caption" });
  const error = h("div", { cls: "hw-attr-error", attrs: { role: "alert" } });
  const note = h("div", { cls: "hw-attr-note", attrs: { role: "status" } });
  const input = h("img", { cls: "hw-attr-input hw-plot", attrs: { alt: "the input image", hidden: true } });
  const image = h("img", { cls: "hw-attr-image hw-plot", attrs: { alt: "attribution over the input", hidden: true } });
  const el = h("div", { cls: "hw-attribution" }, [
    h("div", { cls: "hw-section-title", text: "Attribution" }),
    h("div", { cls: "hw-picker" }, [method, target, run]),
    error,
    caption,
    note,
    h("div", { cls: "hw-attr-images" }, [input, image]), // the input beside its map
  ]);
  const images = pngUrls();

  function updateTargets() {
    // The run bar's targets, in the same words (top class or class k, named by id2label; "loss" where there is one).
    const status = model.get("status") ?? {};
    const chosen = target.value;
    const options = targetOptions(status, status.output?.labels ?? null);
    target.replaceChildren(...options.map((o) => h("option", { attrs: { value: o.value }, text: o.text })));
    target.value = options.some((o) => o.value === chosen) ? chosen : options[0].value;
  }

  function updateResult() {
    const result = model.get("attribution") ?? {};
    const mine = result.layer === model.get("selected") || (result.error && result.method);
    setText(error, mine ? (result.error ?? "") : "");
    setText(caption, mine && !result.error ? (result.caption ?? "") : "");
    setText(note, mine && !result.error ? (result.note ?? "") : ""); // e.g. why the map is blank
    images.revoke();
    const ok = mine && !result.error;
    images.show(image, ok ? result.png : null);
    images.show(input, ok ? result.input_png : null);
  }

  function updateVisible() {
    // CAMs belong to layers; parameters and autograd nodes have none to offer.
    const selection = model.get("selection") ?? {};
    el.hidden = selection.family !== "module";
    updateResult();
  }

  function onRun() {
    const chosen = target.value === "top" || target.value === "loss" ? target.value : Number(target.value);
    requests.send({ type: "attribute", layer: model.get("selected"), method: method.value, target: chosen });
  }

  const offs = [
    subscribe(model, ["change:status"], updateTargets),
    subscribe(model, ["change:attribution"], updateResult),
    subscribe(model, ["change:selection", "change:selected"], updateVisible),
    listen(run, "click", onRun),
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
