/** Colours for scores shown as text: token attributions and logit-lens cells; pure, no DOM. */

const RAISES = [178, 24, 43]; // the dark ends of a red–blue diverging map, as the patching figure's
const LOWERS = [33, 102, 172];
const LENS = [26, 118, 210];

/** A colour's `[r, g, b]`, each 0–255. @typedef {number[]} Rgb */

/**
 * The largest finite magnitude of `scores` (0 when none): the scale every token is coloured against.
 * @param {unknown[]} scores
 */
export function scoreScale(scores) {
  let scale = 0;
  for (const score of scores) {
    const value = Number(score);
    if (Number.isFinite(value)) scale = Math.max(scale, Math.abs(value));
  }
  return scale;
}

/**
 * Whether any finite score is negative: a signed method (gradients) rather than a relevance (rollouts).
 * @param {unknown[]} scores
 */
export function isSigned(scores) {
  return scores.some((score) => Number(score) < 0);
}

/**
 * `[r, g, b]` of a CSS colour as `getComputedStyle` writes it ("rgb(…)" or "rgba(…)"); white when unreadable.
 * @param {string | null | undefined} text
 * @returns {Rgb}
 */
export function parseRgb(text) {
  const parts = String(text ?? "").match(/[\d.]+/g);
  if (!parts || parts.length < 3) return [255, 255, 255];
  const alpha = parts.length > 3 ? Number(parts[3]) : 1;
  return alpha === 0 ? [255, 255, 255] : parts.slice(0, 3).map(Number);
}

/**
 * Relative luminance (WCAG) of an sRGB colour `[r, g, b]` in 0–255.
 * @param {Rgb} rgb
 */
export function luminance(rgb) {
  const [r, g, b] = rgb.map((c) => {
    const s = c / 255;
    return s <= 0.03928 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/**
 * Black or white, whichever reads better on `rgb` (both reach 4.5:1 somewhere; the switch is where they meet).
 * @param {Rgb} rgb
 */
export function textOn(rgb) {
  return luminance(rgb) > 0.179 ? "#000000" : "#ffffff";
}

/**
 * @param {Rgb} from
 * @param {Rgb} to
 * @param {number} t
 */
function mix(from, to, t) {
  return from.map((c, i) => Math.round(c + (to[i] - c) * t));
}

/**
 * The background and text colour of a score: `background` mixed from the page's background `base` toward red
 * (positive) or blue (negative) by |score| / scale; null colours for a non-finite score (drawn marked instead).
 * @param {unknown} score
 * @param {number} scale
 * @param {Rgb} [base]
 */
export function scoreColors(score, scale, base = [255, 255, 255]) {
  const value = Number(score);
  if (!Number.isFinite(value)) return { background: null, color: null, strength: null };
  const strength = scale > 0 ? Math.min(1, Math.abs(value) / scale) : 0;
  const rgb = mix(base, value < 0 ? LOWERS : RAISES, strength);
  return { background: `rgb(${rgb.join(", ")})`, color: textOn(rgb), strength };
}

/**
 * The lens cell's colours: the page's background toward blue by the top token's probability, on a log scale from
 * `floor` (no colour) to 1 (full colour) when `floor` > 0 (a 50k vocabulary's probabilities are small), else linear.
 * @param {unknown} prob
 * @param {Rgb} [base]
 * @param {number} [floor]
 */
export function probabilityColors(prob, base = [255, 255, 255], floor = 0) {
  const value = Number(prob);
  let strength = Number.isFinite(value) ? Math.min(1, Math.max(0, value)) : 0;
  if (floor > 0 && floor < 1) strength = strength <= floor ? 0 : Math.log(strength / floor) / Math.log(1 / floor);
  const rgb = mix(base, LENS, strength);
  return { background: `rgb(${rgb.join(", ")})`, color: textOn(rgb) };
}

/**
 * A probability as a percentage with 3 significant digits: `43.1%`, `0.0123%`, `<0.01%` below 0.01%, and `>99.9%`
 * for one that rounds to 100% without being 1.
 * @param {unknown} prob
 */
export function formatProbability(prob) {
  const value = Number(prob);
  if (!Number.isFinite(value)) return String(prob);
  if (value === 0) return "0%";
  const percent = value * 100;
  if (percent < 0.01) return "<0.01%";
  const text = percent.toPrecision(3);
  if (value < 1 && Number(text) >= 100) return ">99.9%";
  return `${Number(text) >= 100 ? "100" : text}%`;
}

/**
 * A score as short text: 3 significant digits, exponent form for the very small and very large.
 * @param {unknown} score
 */
export function formatScore(score) {
  const value = Number(score);
  if (!Number.isFinite(value)) return String(score);
  if (value === 0) return "0";
  const size = Math.abs(value);
  return size < 1e-3 || size >= 1e4 ? value.toExponential(2) : value.toPrecision(3);
}
