/** The run bar's targets in the model's words, from the status's `output` (what the output offers) and `top`. */

/** @typedef {Partial<import("./payloads.js").Status> | null | undefined} MaybeStatus */
/**
 * The position field: shown for a sequence output, with its label and range.
 * @typedef {{shown: false} | {shown: true, label: string, min: number, max: number, title: string}} PositionField
 */

/** @type {Record<string, {top: string, one: string}>} */
const WORDS = {
  classes: { top: "each item's top class", one: "class" },
  tokens: { top: "top next token", one: "token id" },
  labels: { top: "each token's top label", one: "label" },
};

/**
 * Percent text of a probability (a NaN sent as "nan" stays readable).
 * @param {unknown} prob
 */
function percent(prob) {
  const value = Number(prob);
  return Number.isFinite(value) ? `${(value * 100).toFixed(1)}%` : String(prob);
}

/**
 * The target picker's options `[{value, text}]` for `status`; `labels` (optional) maps an id to its words, e.g. a
 * tokenizer's token strings, shown beside the id. "top" comes first: it is what Run sends by default.
 * @param {MaybeStatus} status
 * @param {Record<string, string> | null} [labels]
 */
export function targetOptions(status, labels = null) {
  /** @type {Partial<import("./payloads.js").OutputScores>} */
  const output = status?.output ?? {};
  const kind = output.kind ?? "classes";
  const options = [];
  if (kind === "none" || kind === "scalar") {
    if (output.loss) options.push({ value: "loss", text: kind === "scalar" ? "the output (a loss)" : "loss" });
    // A failed shape probe is why there are no scores yet: say that, not that the model has none.
    else options.push({ value: "top", text: output.probe_failed || "no scores: forward only" });
    return options;
  }
  const words = WORDS[output.words ?? ""] ?? WORDS.classes;
  options.push({ value: "top", text: words.top });
  for (const [id, prob] of Array.isArray(status?.top) ? status.top : []) {
    const label = labels?.[String(id)];
    const name = label === undefined || label === null ? `${words.one} ${id}` : `${words.one} ${id} ${JSON.stringify(String(label))}`;
    options.push({ value: String(id), text: `${name} (${percent(prob)})` });
  }
  if (output.loss) options.push({ value: "loss", text: "loss" });
  return options;
}

/**
 * The position field for `status`: shown for sequences only, with its label and range (`-T` to `T - 1`).
 * @param {MaybeStatus} status
 * @returns {PositionField}
 */
export function positionField(status) {
  /** @type {Partial<import("./payloads.js").OutputScores>} */
  const output = status?.output ?? {};
  const length = Number(output.positions);
  if (output.kind !== "sequence" || !Number.isInteger(length) || length < 1) return { shown: false };
  const where = output.decoder ? "decoder position" : "position";
  return {
    shown: true,
    label: where,
    min: -length,
    max: length - 1,
    title: `The ${where} the scores are read at: -1 (or empty) is the last of ${length}, 0 the first; negative counts from the end`,
  };
}

/**
 * The run message's `target` and `position` from the picker's value and the position field's text.
 * @param {string} value
 * @param {string | null | undefined} positionText
 * @param {PositionField | null | undefined} field
 */
export function runChoice(value, positionText, field) {
  const target = value === "top" || value === "loss" ? value : Number(value);
  const text = String(positionText ?? "").trim();
  // The loss is one value already: no position applies to it.
  const position = field?.shown && target !== "loss" && text !== "" ? Number(text) : null;
  // A fraction goes as it is, for the kernel to refuse in words; text that is no number at all means the last.
  return { target, position: Number.isFinite(position) ? position : null };
}
