/** Action and edit pickers: what a hook attached from the inspector does when it fires. */

import {
  DEFAULT_DIM,
  EDITS,
  NO_RECORD,
  axesText,
  editsFor,
  parseEdit,
  pickerFields,
  recordKey,
  recordLabel,
} from "../edits.js";
import { h, listen, setText } from "./dom.js";

/** @typedef {import("../payloads.js").Selection} Selection */

const ACTIONS = [
  ["capture", "capture the tensors"],
  ["stats", "statistics only (no tensors kept)"],
  ["print", "print one line"],
];

/**
 * Build the pickers. `update(path, selection, shape)` fits the edits to the selected path (its payload, null
 * until Python's answer comes, and the tree's output shape); `value()` is {action, edit} for the next attach, or {error} (shown in the picker);
 * `showProblem(text)` shows an attach's error. A problem stays until the selection moves to another path or the
 * next attach. `onChange()` is called when the user changes the action, the edit or its fields.
 * `load(hook)` shows an attached hook's action and edit. Returns {el, value, update, showProblem, load, destroy}.
 * @param {{onChange?: () => void}} [options]
 */
export function createEditPicker({ onChange = () => {} } = {}) {
  const action = h(
    "select",
    { cls: "hw-action", attrs: { "aria-label": "Action" } },
    ACTIONS.map(([name, title]) => h("option", { attrs: { value: name, title }, text: name })),
  );
  const edit = h("select", { cls: "hw-edit", attrs: { "aria-label": "Edit" } });
  const arg = h("input", { cls: "hw-edit-arg", attrs: { type: "text", "aria-label": "Edit argument", hidden: true } });
  const dim = h("input", { cls: "hw-edit-dim", attrs: { type: "text", "aria-label": "Ablate along dim", size: 3 } });
  const dimLabel = h("label", { cls: "hw-edit-dim-label", attrs: { hidden: true }, text: "dim " }, [dim]);
  const axes = h("span", { cls: "hw-edit-axes", attrs: { hidden: true } });
  const record = h("select", { cls: "hw-edit-record", attrs: { "aria-label": "Recorded output", hidden: true } });
  const hint = h("span", { cls: "hw-edit-hint", attrs: { hidden: true } });
  const problem = h("span", { cls: "hw-edit-problem", attrs: { role: "alert" } });
  const el = h("div", { cls: "hw-picker" }, [
    h("label", { text: "action " }, [action]),
    h("label", { text: "edit " }, [edit]),
    arg,
    dimLabel,
    record,
    hint,
    axes,
    problem,
  ]);
  /** @type {Partial<Selection> | null} */
  let selection = null;
  /** @type {unknown[] | null} */
  let shape = null;
  /** @type {string | null} */
  let shownPath = null;

  /**
   * Offer the edits that fit `sel`, the payload of the selection at `path`; a problem of another path's clears.
   * @param {string | null} path
   * @param {Partial<Selection> | null} sel
   * @param {unknown} outputShape
   */
  function update(path, sel, outputShape) {
    if (path !== shownPath) setText(problem, "");
    shownPath = path;
    if (!sel) return; // Python's answer to a new selection comes shortly: the picker keeps its edits until then
    selection = sel;
    shape = Array.isArray(outputShape) ? outputShape : null;
    const offered = editsFor(sel);
    const names = offered.map((spec) => spec.name);
    const shown = [...edit.options].map((option) => option.value);
    if (names.join("\u0000") !== shown.join("\u0000")) {
      const chosen = edit.value;
      edit.replaceChildren(...offered.map((spec) => h("option", { attrs: { value: spec.name }, text: spec.label })));
      edit.value = names.includes(chosen) ? chosen : "";
      if (edit.value !== chosen) onEdit();
    }
    renderRecords();
    renderFields();
  }

  function renderRecords() {
    const records = Array.isArray(selection?.records) ? selection.records : [];
    const keys = records.map(recordKey);
    const shown = [...record.options].map((option) => option.value);
    if (keys.join(",") !== shown.join(",")) {
      const chosen = record.value;
      record.replaceChildren(
        ...records.map((r) => h("option", { attrs: { value: recordKey(r) }, text: recordLabel(r) })),
      );
      record.value = keys.includes(chosen) ? chosen : (keys[0] ?? ""); // the newest, unless one was chosen
    }
  }

  /** Show the fields the chosen edit takes. */
  function renderFields() {
    const spec = EDITS.find((e) => e.name === edit.value);
    arg.hidden = !spec?.arg;
    dimLabel.hidden = !spec?.dim;
    const known = spec?.dim ? axesText(selection?.axes, shape) : "";
    axes.hidden = !known;
    setText(axes, known);
    const hasRecords = record.options.length > 0;
    record.hidden = !spec?.record || !hasRecords;
    hint.hidden = !spec?.record || hasRecords;
    setText(hint, spec?.record && !hasRecords ? NO_RECORD : "");
  }

  function onEdit() {
    const spec = EDITS.find((e) => e.name === edit.value);
    arg.placeholder = spec?.arg ?? "";
    arg.value = spec?.initial ?? "";
    dim.value = spec?.dim ? DEFAULT_DIM : "";
    renderFields();
  }

  function value() {
    const rank = Array.isArray(selection?.axes) ? selection.axes.length : null;
    const parsed = parseEdit(edit.value, arg.value, {
      dim: dim.value,
      rank,
      heads: selection?.heads ?? null,
      record: record.hidden ? "" : record.value,
    });
    if (parsed && !Array.isArray(parsed)) {
      setText(problem, parsed.error);
      return { action: action.value, edit: null, error: parsed.error };
    }
    setText(problem, "");
    return { action: action.value, edit: parsed };
  }

  /** @param {string} text */
  function showProblem(text) {
    setText(problem, text);
  }

  /**
   * Show what an attached hook does (its action and edit), so that changing one field keeps the others.
   * @param {import("../payloads.js").HookItem} hook
   */
  function load(hook) {
    if (ACTIONS.some(([name]) => name === hook.action)) action.value = hook.action;
    const fields = pickerFields(hook.edit);
    if (fields === null || ![...edit.options].some((option) => option.value === fields.name)) return;
    edit.value = fields.name;
    onEdit();
    if (fields.arg) arg.value = fields.arg;
    if (fields.dim) dim.value = fields.dim;
    renderFields();
  }

  const offs = [
    listen(edit, "change", () => {
      onEdit();
      onChange();
    }),
    ...[action, arg, dim, record].map((field) => listen(field, "change", () => onChange())),
  ];
  update(null, { family: "none" }, null);
  onEdit();
  return { el, value, update, showProblem, load, destroy: () => offs.forEach((off) => off()) };
}
