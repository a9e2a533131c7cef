/** The page's theme as the kernel draws figures in it: a name and two colours as `#rrggbb`; pure, no DOM. */

import { luminance } from "./scores.js";

const DARK_BELOW = 0.4; // relative luminance of a background under which the page reads as dark

/** `[r, g, b, a]` of a CSS colour as `getComputedStyle` writes it (`rgb(…)`, `rgba(…)`, `color(srgb …)`, `#rgb`,
 * `#rrggbb`); null when unreadable.
 * @param {string | null | undefined} text
 * @returns {number[] | null}
 */
export function parseColor(text) {
  const value = String(text ?? "").trim();
  const hex = value.match(/^#([0-9a-f]{3}|[0-9a-f]{6})$/i);
  if (hex) {
    const digits = hex[1].length === 3 ? [...hex[1]].map((d) => d + d) : /** @type {string[]} */ (hex[1].match(/../g));
    return [...digits.map((d) => parseInt(d, 16)), 1];
  }
  const srgb = value.match(/^color\(srgb\s+([^)]*)\)$/i); // what a color-mix() computes to, channels in 0–1
  const rgb = srgb ?? value.match(/^rgba?\(([^)]*)\)$/i);
  if (!rgb) return null;
  const parts = rgb[1].split(/[\s,/]+/).filter(Boolean).map(Number);
  if (parts.length < 3 || parts.some((p) => !Number.isFinite(p))) return null;
  const scale = srgb ? 255 : 1;
  return [parts[0] * scale, parts[1] * scale, parts[2] * scale, parts.length > 3 ? parts[3] : 1];
}

/**
 * `color` over an opaque `under` (`[r, g, b]`): what the eye sees of a translucent colour.
 * @param {number[]} color
 * @param {number[]} under
 */
export function composite(color, under) {
  const alpha = Math.max(0, Math.min(1, color[3]));
  return [0, 1, 2].map((i) => Math.round(color[i] * alpha + under[i] * (1 - alpha)));
}

/**
 * `#rrggbb` of `[r, g, b]`.
 * @param {number[]} rgb
 */
export function toHex(rgb) {
  return `#${rgb.map((c) => Math.max(0, Math.min(255, Math.round(c))).toString(16).padStart(2, "0")).join("")}`;
}

/**
 * WCAG contrast ratio of two opaque colours `[r, g, b]` (1 to 21).
 * @param {number[]} first
 * @param {number[]} second
 */
export function contrast(first, second) {
  const [high, low] = [luminance(first), luminance(second)].sort((a, b) => b - a);
  return (high + 0.05) / (low + 0.05);
}

/**
 * The `theme` traitlet from what the page shows: `jpThemeLight` (JupyterLab's and Notebook 7's "true"/"false" on
 * `<body>`, or undefined), `bodyClasses` (VS Code marks `vscode-dark`, `vscode-high-contrast`), and the computed
 * `background` and `foreground` of the widget and `pageBackground` behind it (CSS colour strings). Translucent
 * colours are composited on what is under them; without a marker the background's luminance names the theme.
 * @param {{jpThemeLight?: string | undefined, bodyClasses?: string[], background?: string, foreground?: string,
 *   pageBackground?: string}} page
 * @returns {import("./payloads.js").Theme}
 */
export function pageTheme({ jpThemeLight, bodyClasses = [], background, foreground, pageBackground }) {
  const page = composite(parseColor(pageBackground) ?? [255, 255, 255, 1], [255, 255, 255]);
  const back = composite(parseColor(background) ?? [0, 0, 0, 0], page);
  const classes = new Set(bodyClasses);
  /** @type {"light" | "dark"} */
  let name;
  if (jpThemeLight === "true" || jpThemeLight === "false") name = jpThemeLight === "true" ? "light" : "dark";
  else if (classes.has("vscode-dark") || classes.has("vscode-high-contrast")) name = "dark";
  else if (classes.has("vscode-light")) name = "light";
  else name = luminance(back) < DARK_BELOW ? "dark" : "light";
  const fallback = name === "dark" ? [231, 231, 231] : [0, 0, 0];
  let front = composite(parseColor(foreground) ?? [...fallback, 1], back);
  if (contrast(front, back) < 4.5) front = fallback; // a page's odd pair never gives unreadable figures
  return { name, background: toHex(back), foreground: toHex(front) };
}

/**
 * Whether two theme values say the same (a rewrite of an equal one would redraw every figure for nothing).
 * @param {import("./payloads.js").Theme | null | undefined} a
 * @param {import("./payloads.js").Theme | null | undefined} b
 */
export function sameTheme(a, b) {
  return !!a && !!b && a.name === b.name && a.background === b.background && a.foreground === b.foreground;
}
