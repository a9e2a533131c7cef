/** The edit a user picked, as the `edit` of an attach message; pure, no DOM. */

/** Edits the inspector offers: name, what its argument is, and a default argument. */
export const EDITS = [
  { name: "", label: "no edit", arg: null },
  { name: "scale", label: "scale ×", arg: "factor", initial: "2" },
  { name: "clip", label: "clip ±", arg: "value", initial: "1" },
  { name: "clip_norm", label: "clip norm", arg: "max norm", initial: "1" },
  { name: "zero", label: "zero", arg: null },
  { name: "ablate", label: "ablate channels", arg: "channels, e.g. 0, 3", initial: "0" },
];

/**
 * `[name, arg]` for the message (`["zero"]` without an argument, null for no edit), or
 * `{error}` naming what is wrong with the argument text.
 */
export function parseEdit(name, text) {
  const spec = EDITS.find((edit) => edit.name === name);
  if (!spec || spec.name === "") return null;
  if (spec.arg === null) return [spec.name];
  const raw = String(text ?? "").trim();
  if (spec.name === "ablate") {
    const channels = raw.split(/[\s,]+/).filter(Boolean).map(Number);
    if (channels.length === 0 || channels.some((c) => !Number.isInteger(c) || c < 0)) {
      return { error: `ablate needs channel numbers such as "0, 3", got "${raw}"` };
    }
    return [spec.name, channels];
  }
  const value = Number(raw);
  if (raw === "" || !Number.isFinite(value)) return { error: `${spec.label} needs a number, got "${raw}"` };
  return [spec.name, value];
}
