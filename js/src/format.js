/** Text formatting for counts, shapes and hook badges; pure, no DOM. */

const UNITS = ["k", "M", "B", "T"];
const BADGE_LABELS = new Map([
  ["forward_pre", "pre"],
  ["forward", "fwd"],
  ["grad", "grad"],
]);

/** Compact count: 999 -> "999", 1234 -> "1.2k", 3_400_000 -> "3.4M". */
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

/** Parameter counts as "12.3k", with frozen ones appended when present: "12.3k (+1k frozen)".
 * A null count is unknown (a lazy module not materialized yet) and reads "uninitialized". */
export function formatParams(trainable, frozen) {
  const base = trainable === null ? UNINITIALIZED : formatCount(trainable ?? 0);
  if (frozen === null) return `${base} (+${UNINITIALIZED} frozen)`;
  return frozen > 0 ? `${base} (+${formatCount(frozen)} frozen)` : base;
}

const UNINITIALIZED = "uninitialized";

/** Tensor shape as "1×16×32×32"; "scalar" for a 0-d tensor, "—" when unknown. */
export function formatShape(shape) {
  if (!Array.isArray(shape)) return "—";
  if (shape.length === 0) return "scalar";
  // Defensive: several outputs may arrive as a list of shapes.
  if (shape.some(Array.isArray)) return shape.map((s) => `(${formatShape(s)})`).join(", ");
  return shape.join("×");
}

/** Short badge text for a hook kind: forward_pre -> "pre", forward -> "fwd", others unchanged. */
export function badgeLabel(kind) {
  return BADGE_LABELS.get(kind) ?? String(kind);
}

/** "fired 1 time" / "fired 3 times", for tooltips and the inspector's hook list. */
export function formatFired(n) {
  const count = Number.isFinite(n) ? n : 0;
  return `fired ${count} ${count === 1 ? "time" : "times"}`;
}

/** Display name of a module path: the root ("") reads "(model)". */
export function displayPath(path) {
  return path === "" ? "(model)" : path;
}

/** Where a capture sits in its history: "step 3", or "step 3 · call 1" when the target ran more than once a step. */
export function formatPosition(step, call, showCall) {
  const at = `step ${step}`;
  return showCall && Number.isFinite(call) ? `${at} · call ${call}` : at;
}

/** The (step, call) positions of a plot item, and whether any step holds several calls (then calls are named). */
export function plotPositions(item) {
  const raw = Array.isArray(item?.positions) ? item.positions : [];
  const positions = raw.filter((p) => Array.isArray(p) && Number.isFinite(p[0])).map(([step, call]) => [step, Number.isFinite(call) ? call : 0]);
  return { positions, showCall: positions.some(([, call]) => call > 0) };
}
