/** Text formatting for counts, shapes and names; pure, no DOM. */

const UNITS = ["k", "M", "B", "T"];

/**
 * Compact count: 999 -> "999", 1234 -> "1.2k", 3_400_000 -> "3.4M".
 * @param {unknown} n
 */
export function formatCount(n) {
  if (typeof n !== "number" || !Number.isFinite(n)) return "—";
  const v = Math.round(n);
  if (Math.abs(v) < 1000) return String(v);
  for (let i = 0; i < UNITS.length; i++) {
    const scaled = v / 1000 ** (i + 1);
    // One decimal below 100 ("12.3k"), none above ("123k"); a value that rounds up to
    // 1000 moves to the next unit so 999_999 reads "1M", never "1000k".
    const text = Math.abs(scaled) < 99.95 ? scaled.toFixed(1) : scaled.toFixed(0);
    if (Math.abs(Number(text)) < 1000 || i === UNITS.length - 1) {
      return text.replace(/\.0$/, "") + UNITS[i];
    }
  }
  return String(v);
}

/** Parameter counts as "12.3k", with frozen ones appended when present: "12.3k (+1k frozen)", and how many of those
 * are packed weights (a quantized module's): "0 (+1k frozen, 1k packed)".
 * A null count is unknown (a lazy module not materialized yet) and reads "uninitialized".
 * @param {number | null} trainable
 * @param {number | null} frozen
 * @param {number} [packed]
 */
export function formatParams(trainable, frozen, packed = 0) {
  const base = trainable === null ? UNINITIALIZED : formatCount(trainable ?? 0);
  if (frozen === null) return `${base} (+${UNINITIALIZED} frozen)`;
  const inPacks = packed > 0 ? `, ${formatCount(packed)} packed` : "";
  return frozen > 0 ? `${base} (+${formatCount(frozen)} frozen${inPacks})` : base;
}

const UNINITIALIZED = "uninitialized";

/**
 * Tensor shape as "1×16×32×32"; "scalar" for a 0-d tensor, "—" when unknown.
 * @param {unknown} shape
 * @returns {string}
 */
export function formatShape(shape) {
  if (!Array.isArray(shape)) return "—";
  if (shape.length === 0) return "scalar";
  // Defensive: several outputs may arrive as a list of shapes.
  if (shape.some(Array.isArray)) return shape.map((s) => `(${formatShape(s)})`).join(", ");
  return shape.join("×");
}

/**
 * "fired 1 time" / "fired 3 times", for tooltips and the inspector's hook list.
 * @param {number | undefined} n
 */
export function formatFired(n) {
  const count = Number.isFinite(n) ? n : 0;
  return `fired ${count} ${count === 1 ? "time" : "times"}`;
}

/** Characters of a model's name that are shown; a longer name is cut there and ends in "…" (as in Python). */
export const SHOWN_LENGTH = 200;

// What Python's str.isprintable() rejects: control, format (bidi controls, zero-width), surrogate, private-use
// and unassigned characters, line and paragraph separators, and every space separator but the space itself.
const INVISIBLE = /[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]|(?! )\p{Zs}/gu;
// The same, but for a text's own line breaks and tabs (messages, tracebacks, multi-line tooltips).
const INVISIBLE_IN_TEXT = /(?![\n\t])[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]|(?! )\p{Zs}/gu;
const NAMED_ESCAPES = new Map([
  ["\n", "\\n"],
  ["\r", "\\r"],
  ["\t", "\\t"],
]);

/** @param {string} char */
function escapeChar(char) {
  const named = NAMED_ESCAPES.get(char);
  if (named) return named;
  const code = /** @type {number} */ (char.codePointAt(0)); // a match is one character, never empty
  const hex = code.toString(16);
  if (code < 0x100) return `\\x${hex.padStart(2, "0")}`;
  if (code < 0x10000) return `\\u${hex.padStart(4, "0")}`;
  return `\\U${hex.padStart(8, "0")}`;
}

/**
 * @param {unknown} text
 * @param {RegExp} pattern
 */
function escaped(text, pattern) {
  const source = String(text ?? "");
  pattern.lastIndex = 0;
  return pattern.test(source) ? source.replace(pattern, escapeChar) : source;
}

/**
 * `text` with every character that does not print escaped as Python's repr escapes it ("\\u202e", "\\n"),
 * as Python's `hookwidgets.core.display.visible` does: a right-to-left override in a module name would
 * otherwise turn the text after it around on the page. For names; `visibleText` for whole texts.
 * @param {unknown} text
 */
export function visible(text) {
  return escaped(text, INVISIBLE);
}

/** `visible`, but keeping the text's own line breaks and tabs: every text the page shows goes through it
 * (the DOM helpers in view/dom.js), so a name inside a message or a traceback cannot reorder the page either.
 * @param {unknown} text
 */
export function visibleText(text) {
  return escaped(text, INVISIBLE_IN_TEXT);
}

/**
 * `name`, or its first SHOWN_LENGTH characters (code points, as Python counts) and "…" when longer.
 * @param {unknown} name
 */
export function shortened(name) {
  const source = String(name ?? "");
  if (source.length <= SHOWN_LENGTH) return source; // UTF-16 units are never fewer than code points
  let end = 0;
  let count = 0;
  for (const char of source) {
    if (count === SHOWN_LENGTH) return `${source.slice(0, end)}…`;
    end += char.length;
    count += 1;
  }
  return source;
}

/**
 * A model's name (module path, class, parameter) as the page shows it: cut, and invisible characters escaped.
 * @param {unknown} name
 */
export function displayName(name) {
  return visible(shortened(name));
}

/**
 * Display name of a module path: the root ("") reads "(model)"; others as `displayName`.
 * @param {string | null | undefined} path
 */
export function displayPath(path) {
  return path === "" ? "(model)" : displayName(path);
}

/**
 * Where a capture sits in its history: "step 3", or "step 3 · call 1" when the module ran more than once a step.
 * @param {number} step
 * @param {number} call
 * @param {boolean} showCall
 */
export function formatPosition(step, call, showCall) {
  const at = `step ${step}`;
  return showCall && Number.isFinite(call) ? `${at} · call ${call}` : at;
}

/**
 * The (step, call) positions of a plot item, and whether any step holds several calls (then calls are named).
 * @param {Partial<import("./payloads.js").PlotItem> | null | undefined} item
 */
export function plotPositions(item) {
  const raw = Array.isArray(item?.positions) ? item.positions : [];
  /** @type {[number, number][]} */
  const positions = raw.filter((p) => Array.isArray(p) && Number.isFinite(p[0])).map(([step, call]) => [step, Number.isFinite(call) ? call : 0]);
  return { positions, showCall: positions.some(([, call]) => call > 0) };
}
