/** Action and edit pickers: what a hook attached from the inspector does when it fires. */

import { EDITS, parseEdit } from "../edits.js";
import { h, listen, setText } from "./dom.js";

const ACTIONS = [
  ["capture", "capture the tensors"],
  ["stats", "statistics only (no tensors kept)"],
  ["print", "print one line"],
];

/** Build the pickers; `value()` is {action, edit} for the next attach. Returns {el, value, destroy}. */
export function createEditPicker() {
  const action = h(
    "select",
    { cls: "hw-action", attrs: { "aria-label": "Action" } },
    ACTIONS.map(([name, title]) => h("option", { attrs: { value: name, title }, text: name })),
  );
  const edit = h(
    "select",
    { cls: "hw-edit", attrs: { "aria-label": "Edit" } },
    EDITS.map((spec) => h("option", { attrs: { value: spec.name }, text: spec.label })),
  );
  const arg = h("input", { cls: "hw-edit-arg", attrs: { type: "text", "aria-label": "Edit argument", hidden: true } });
  const problem = h("span", { cls: "hw-edit-problem", attrs: { role: "alert" } });
  const el = h("div", { cls: "hw-picker" }, [
    h("label", { text: "action " }, [action]),
    h("label", { text: "edit " }, [edit]),
    arg,
    problem,
  ]);

  function onEdit() {
    const spec = EDITS.find((e) => e.name === edit.value);
    arg.hidden = !spec?.arg;
    arg.placeholder = spec?.arg ?? "";
    arg.value = spec?.initial ?? "";
    setText(problem, "");
  }

  function value() {
    const parsed = parseEdit(edit.value, arg.value);
    if (parsed && !Array.isArray(parsed)) {
      setText(problem, parsed.error);
      return { action: action.value, edit: null, error: parsed.error };
    }
    setText(problem, "");
    return { action: action.value, edit: parsed };
  }

  const offs = [listen(edit, "change", onEdit)];
  return { el, value, destroy: () => offs.forEach((off) => off()) };
}
