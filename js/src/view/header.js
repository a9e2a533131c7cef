/** Header and run bar: model name, module count, run mode and target, progress, memory meter, status. */

import { describeMemory } from "../bytes.js";
import { displayName, displayPath } from "../format.js";
import { runEdits } from "../hooks.js";
import { statusLine } from "../live_state.js";
import { positionField, runChoice, targetOptions } from "../targets.js";
import { countModules, isTree } from "../tree.js";
import { h, listen, setAttr, setText, subscribe } from "./dom.js";

/**
 * Build the header for `model`, sending through `requests`; returns {el, destroy}.
 * @param {import("../widget_model.js").WidgetModel} model
 * @param {import("../widget_model.js").Requests} requests
 */
export function createHeader(model, requests) {
  /** @type {import("../targets.js").PositionField} */
  let field = { shown: false };
  const title = h("span", { cls: "hw-title" });
  const count = h("span", { cls: "hw-count" });
  const mode = h("select", { cls: "hw-run-mode", attrs: { "aria-label": "What Run does" } }, [
    h("option", { attrs: { value: "backward" }, text: "forward + backward" }),
    h("option", { attrs: { value: "forward" }, text: "forward only" }),
  ]);
  const target = h("select", { cls: "hw-run-target", attrs: { "aria-label": "Backward from" } }, [
    h("option", { attrs: { value: "top" }, text: "each item's top class" }),
  ]);
  const position = h("input", {
    cls: "hw-run-position",
    attrs: { type: "number", step: "1", placeholder: "last", "aria-label": "position", hidden: true },
  });
  const positionLabel = h("label", { cls: "hw-run-position-label", attrs: { hidden: true } }, [
    h("span", { cls: "hw-run-position-word", text: "at position" }),
    position,
  ]);
  const train = h("input", {
    cls: "hw-run-train",
    attrs: { type: "checkbox", title: "Run in training mode: Dropout active, BatchNorm on batch statistics" },
  });
  const trainLabel = h("label", { cls: "hw-run-train-label" }, [train, h("span", { text: "train mode" })]);
  const run = h("button", {
    cls: "hw-run",
    attrs: { type: "button", title: "Run the example input through the model with the hooks attached" },
    text: "Run",
  });
  const edits = h("span", { cls: "hw-run-edits", attrs: { hidden: true } });
  const progress = h("span", { cls: "hw-progress", attrs: { hidden: true, "aria-hidden": "true" } });
  const status = h("span", { cls: "hw-status", attrs: { role: "status", "aria-live": "polite" } });
  const meterFill = h("span", { cls: "hw-meter-fill" });
  const meter = h("span", { cls: "hw-meter", attrs: { role: "meter", "aria-label": "Capture memory" } }, [meterFill]);
  const meterText = h("span", { cls: "hw-meter-text" });
  const meterWarning = h("span", { cls: "hw-meter-short", attrs: { hidden: true } });
  const errors = h("span", { cls: "hw-error-count", attrs: { hidden: true } });
  const el = h("div", { cls: "hw-header" }, [
    h("div", { cls: "hw-header-line" }, [title, count, errors, h("span", { cls: "hw-spacer" }), meter, meterText, meterWarning]),
    h("div", { cls: "hw-run-bar" }, [
      mode,
      target,
      positionLabel,
      trainLabel,
      run,
      edits,
      // One text line of a width set by the bar alone, not by what it says or whether busy: the widget never moves.
      h("div", { cls: "hw-status-line" }, [progress, status]),
    ]),
  ]);

  function updateTree() {
    const tree = model.get("tree");
    if (isTree(tree)) {
      setText(title, displayName(tree.name || tree.cls || "model"));
      const n = countModules(tree);
      setText(count, `${n.toLocaleString("en-US")} ${n === 1 ? "module" : "modules"}`);
    } else {
      setText(title, "—");
      setText(count, "");
    }
  }

  function updateStatus() {
    const state = model.get("status") ?? {};
    const name = typeof state.state === "string" ? state.state : "idle";
    status.setAttribute("data-state", name);
    updateLine();
    run.disabled = name === "busy";
    progress.hidden = name !== "busy" && name !== "live";
    const chosen = target.value;
    const options = targetOptions(state, state.output?.labels ?? null); // ids named in the model's words
    target.replaceChildren(...options.map((o) => h("option", { attrs: { value: o.value }, text: o.text })));
    // Keep the user's choice when it is still offered.
    target.value = options.some((o) => o.value === chosen) ? chosen : options[0].value;
    field = positionField(state);
    positionLabel.hidden = !field.shown;
    position.hidden = !field.shown;
    if (field.shown) {
      setText(/** @type {Node} */ (positionLabel.firstChild), `at ${field.label}`);
      setAttr(position, "min", String(field.min));
      setAttr(position, "max", String(field.max));
      setAttr(positionLabel, "title", field.title);
    }
  }

  function updateLine() {
    const line = statusLine(model.get("status"), model.get("selected") ?? "");
    setText(status, line.text);
    setAttr(status, "title", line.title);
  }

  function updateMemory() {
    const memory = model.get("memory") ?? {};
    const used = Number(memory.bytes ?? 0);
    const budget = Number(memory.budget ?? 0);
    const fraction = budget > 0 ? Math.min(1, used / budget) : 0;
    meterFill.style.width = `${(fraction * 100).toFixed(1)}%`;
    meter.setAttribute("aria-valuenow", String(Math.round(fraction * 100)));
    const words = describeMemory(memory);
    setText(meterText, words.text);
    setText(meterWarning, words.warning ? `⚠ ${words.warning}` : "");
    meterWarning.hidden = !words.warning;
    meter.classList.toggle("hw-meter-over", Boolean(words.warning));
    meter.classList.toggle("hw-meter-evicting", words.evicting); // the budget is full: captures are being evicted
    meterText.classList.toggle("hw-meter-evicting", words.evicting);
    for (const el of [meter, meterText, meterWarning]) setAttr(el, "title", words.title);
  }

  function updateEdits() {
    const said = runEdits(model.get("hooks"));
    edits.hidden = said.text === "";
    setText(edits, said.text ? `✎ ${said.text}` : "");
    setAttr(edits, "title", said.title);
  }

  function updateErrors() {
    const failing = (model.get("hooks") ?? []).filter((hook) => hook.error && !hook.foreign);
    errors.hidden = failing.length === 0;
    setText(errors, `⚠ ${failing.length} failing ${failing.length === 1 ? "hook" : "hooks"}`);
    setAttr(errors, "title", failing.map((hook) => `${hook.kind} on ${displayPath(hook.path)}`).join("\n"));
  }

  function onErrorsClick() {
    // Jump to the first failing hook: its row and the inspector show the traceback.
    const first = (model.get("hooks") ?? []).find((hook) => hook.error && !hook.foreign);
    if (!first) return;
    model.set("selected", first.path);
    model.save_changes();
  }

  function onRun() {
    const chosen = runChoice(target.value, position.value, field);
    requests.send({ type: "run", mode: mode.value, ...chosen, train: train.checked });
  }

  function onMode() {
    target.disabled = mode.value === "forward";
    position.disabled = mode.value === "forward";
  }

  const offs = [
    subscribe(model, ["change:tree"], updateTree),
    subscribe(model, ["change:status"], updateStatus),
    subscribe(model, ["change:selected"], updateLine),
    subscribe(model, ["change:memory"], updateMemory),
    subscribe(model, ["change:hooks"], updateErrors),
    subscribe(model, ["change:hooks"], updateEdits),
    listen(run, "click", onRun),
    listen(mode, "change", onMode),
    listen(errors, "click", onErrorsClick),
  ];
  updateTree();
  updateStatus();
  updateMemory();
  updateErrors();
  updateEdits();
  return { el, destroy: () => offs.forEach((off) => off()) };
}
