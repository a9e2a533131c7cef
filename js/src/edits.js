/** The edit a user picked, as the `edit` of an attach message; pure, no DOM. */

/** @typedef {import("./payloads.js").Selection} Selection */
/** @typedef {import("./payloads.js").RecordChoice} RecordChoice */
/**
 * An edit the picker offers.
 * @typedef {{name: string, label: string, arg: string | null, initial?: string, dim?: boolean, heads?: boolean,
 *   record?: boolean}} EditSpec
 */
/** An edit as a message carries it: `[name, arg…]`. @typedef {[string, ...unknown[]]} Edit */
/** What is wrong with the picker's fields. @typedef {{error: string}} EditError */
/**
 * `parseEdit`'s context: ablate's dim text, the output's rank, the module's head count, the chosen record.
 * @typedef {{dim?: string, rank?: number | null, heads?: number | null, record?: string}} EditContext
 */

/**
 * Edits the inspector offers: name, label, what its argument is and a default; `dim` (ablate) adds a dim field,
 * `record` (replace, mean_ablate) takes a recorded run of the module instead of text, `heads` needs a head count.
 * @type {EditSpec[]}
 */
export const EDITS = [
  { name: "", label: "no edit", arg: null },
  { name: "scale", label: "scale ×", arg: "factor", initial: "2" },
  { name: "clip", label: "clip ±", arg: "value", initial: "1" },
  { name: "clip_norm", label: "clip norm", arg: "max norm", initial: "1" },
  { name: "zero", label: "zero", arg: null },
  { name: "ablate", label: "ablate indices", arg: "indices, e.g. 0, 3", initial: "0", dim: true },
  { name: "ablate_heads", label: "ablate heads", arg: "heads, e.g. 0, 2", initial: "0", heads: true },
  { name: "replace", label: "replace with a recorded output", arg: null, record: true },
  { name: "mean_ablate", label: "mean-ablate (a recorded output's batch mean)", arg: null, record: true },
];

/** Ablate's dim when the field is left as it comes: dim 1 (channels, or tokens), as ("ablate", [k]) means. */
export const DEFAULT_DIM = "1";

/** How to get a record to patch in, said where the picker would list none. */
export const NO_RECORD = "no forward capture of this module yet: capture its forward, Run, then pick the run";

/**
 * The edits that fit a selection (its payload, or null): ablate heads only where Python found the module's heads,
 * the patches only on a module (they take its recorded forward outputs).
 * @param {Partial<Selection> | null} selection
 */
export function editsFor(selection) {
  const heads = Number.isInteger(selection?.heads);
  const module = selection?.family === "module";
  return EDITS.filter((spec) => (!spec.heads || heads) && (!spec.record || module));
}

/**
 * `"step/call"`, the value of a record's option.
 * @param {RecordChoice} record
 */
export function recordKey(record) {
  return `${record.step}/${record.call}`;
}

/**
 * A record's option text: its step, its call when the step holds several, and its shape.
 * @param {RecordChoice} record
 */
export function recordLabel(record) {
  const call = record.call > 0 ? `, call ${record.call}` : "";
  return `step ${record.step}${call} · ${(record.shape ?? []).join("×") || "scalar"}`;
}

/**
 * What each dim of the output is, for ablate's dim: `dim 0: batch (2) · dim 1: tokens (8) · dim 2 or -1: features
 * (32)`; "" when the output's shape is unknown.
 * @param {string[] | null | undefined} axes
 * @param {unknown[] | null | undefined} shape
 */
export function axesText(axes, shape) {
  if (!Array.isArray(axes) || !Array.isArray(shape) || axes.length !== shape.length) return "";
  const rank = axes.length;
  return axes
    .map((name, i) => {
      const which = i === rank - 1 && rank > 1 ? `dim ${i} or -1` : `dim ${i}`;
      return `${which}: ${name || "size"} (${shape[i]})`;
    })
    .join(" · ");
}

/**
 * `[name, arg…]` for the message (`["zero"]` without an argument, null for no edit), or `{error}` naming what is
 * wrong. `text` is the argument's text; `extra` holds `dim` (ablate's dim text), `rank` (the output's dims, when
 * known), `heads` (the module's head count, or null) and `record` (the chosen record's `"step/call"`, or "").
 * @param {string} name
 * @param {unknown} text
 * @param {EditContext} [extra]
 * @returns {Edit | EditError | null}
 */
export function parseEdit(name, text, extra = {}) {
  const spec = EDITS.find((edit) => edit.name === name);
  if (!spec || spec.name === "") return null;
  if (spec.record) return parseRecord(spec.name, extra.record);
  if (spec.arg === null) return [spec.name];
  const raw = String(text ?? "").trim();
  if (spec.name === "ablate" || spec.name === "ablate_heads") {
    const what = spec.name === "ablate" ? "indices" : "head numbers";
    const indices = raw.split(/[\s,]+/).filter(Boolean).map(Number);
    if (indices.length === 0 || indices.some((c) => !Number.isInteger(c) || c < 0)) {
      return { error: `${spec.label} needs ${what} such as "0, 3", got "${raw}"` };
    }
    if (spec.name === "ablate_heads") return checkHeads(indices, extra.heads);
    return withDim(indices, extra.dim, extra.rank);
  }
  const value = Number(raw);
  if (raw === "" || !Number.isFinite(value)) return { error: `${spec.label} needs a number, got "${raw}"` };
  return [spec.name, value];
}

/**
 * @param {number[]} indices
 * @param {string | undefined} dimText
 * @param {number | null | undefined} rank
 * @returns {Edit | EditError}
 */
function withDim(indices, dimText, rank) {
  const raw = String(dimText ?? "").trim();
  if (raw === "") return ["ablate", indices]; // the engine's default: dim 1 (dim 0 of a 1-D output)
  const dim = Number(raw);
  if (!Number.isInteger(dim)) return { error: `ablate's dim must be an integer such as 1 or -1, got "${raw}"` };
  if (typeof rank === "number" && Number.isInteger(rank) && (dim < -rank || dim >= rank)) {
    const dims = rank === 1 ? "1 dim (0, or -1)" : `${rank} dims (0 to ${rank - 1}, or -${rank} to -1)`;
    return { error: `ablate's dim ${dim} is out of range: the output has ${dims}` };
  }
  return ["ablate", indices, dim];
}

/**
 * @param {number[]} heads
 * @param {number | null | undefined} count
 * @returns {Edit | EditError}
 */
function checkHeads(heads, count) {
  if (typeof count !== "number" || !Number.isInteger(count)) {
    return { error: "ablate heads: this module has no heads the explorer can find" };
  }
  const bad = heads.find((head) => head >= count);
  if (bad !== undefined) {
    return { error: `ablate heads: head ${bad} is out of range, this module has ${count} (0 to ${count - 1})` };
  }
  return ["ablate_heads", heads];
}

/**
 * @param {string} name
 * @param {string | undefined} key
 * @returns {Edit | EditError}
 */
function parseRecord(name, key) {
  const match = /^(\d+)\/(\d+)$/.exec(String(key ?? ""));
  if (!match) return { error: NO_RECORD };
  return [name, { step: Number(match[1]), call: Number(match[2]) }];
}

/**
 * The picker's fields that show a hook's `edit` (the hooks traitlet's list of `[name, arg…]`): {name, arg, dim},
 * `name` "" for no edit; null when the picker cannot show it (several edits at once).
 * @param {unknown[][] | null | undefined} edit
 */
export function pickerFields(edit) {
  if (!Array.isArray(edit) || edit.length === 0) return { name: "", arg: "", dim: "" };
  if (edit.length !== 1 || !Array.isArray(edit[0])) return null;
  const [name, first, second] = edit[0];
  const spec = EDITS.find((e) => e.name === name);
  if (!spec) return null;
  if (name === "ablate" || name === "ablate_heads") {
    const list = Array.isArray(first) ? first.join(", ") : String(first ?? "");
    return { name: spec.name, arg: list, dim: name === "ablate" && second !== undefined ? String(second) : "" };
  }
  return { name: spec.name, arg: spec.arg === null || first === undefined ? "" : String(first), dim: "" };
}
