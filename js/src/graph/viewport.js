/** Viewport arithmetic of the graph canvas: a readable fit, the minimap's geometry; pure, no DOM. */

/** Smallest text on screen, in px, that a fit may produce. */
export const MIN_LABEL_PX = 9;
/** Font size, in px, of the smallest text drawn in the graph (block details, box names, badges). */
export const SMALLEST_FONT_PX = 10;
/** The smallest scale a fit uses: the smallest font drawn at MIN_LABEL_PX. */
export const READABLE_SCALE = MIN_LABEL_PX / SMALLEST_FONT_PX;
const MAX_FIT_SCALE = 1.2; // a small graph is not blown up past this
const PAD = 16;

/** A drawing's extent in layout units. @typedef {{x: number, y: number, width: number, height: number}} Bounds */
/** @typedef {{width: number, height: number}} Size */
/** Pan and zoom: screen = layout × k + (x, y). @typedef {{x: number, y: number, k: number}} Transform */
/**
 * A minimap's size and its scales from layout units.
 * @typedef {{width: number, height: number, sx: number, sy: number}} MapSize
 */

/**
 * The offset along one axis that shows layout span [lo, hi] at scale k: centred when it fits, else `want` kept in bounds.
 * @param {number} lo
 * @param {number} hi
 * @param {number} k
 * @param {number} length
 * @param {number} want
 */
function place(lo, hi, k, length, want) {
  const span = (hi - lo) * k;
  if (span + PAD <= length) return length / 2 - ((lo + hi) / 2) * k;
  return Math.min(PAD / 2 - lo * k, Math.max(length - PAD / 2 - hi * k, want));
}

/**
 * The transform {x, y, k, partial} that fits `bounds` ({x, y, width, height}) in a `view` ({width, height}):
 * the whole drawing when it fits at a readable scale, else READABLE_SCALE around `focus` ([x, y] in
 * layout units; the top centre by default) with `partial` true.
 * @param {Bounds} bounds
 * @param {Size} view
 * @param {number[] | null} [focus]
 */
export function fitTransform(bounds, view, focus = null) {
  const width = Math.max(1, bounds.width || 1);
  const height = Math.max(1, bounds.height || 1);
  const whole = Math.min((view.width - PAD) / width, (view.height - PAD) / height);
  const k = Math.min(MAX_FIT_SCALE, Math.max(READABLE_SCALE, whole));
  const partial = whole < READABLE_SCALE;
  const [fx, fy] = focus ?? [bounds.x + width / 2, bounds.y + (view.height - PAD) / 2 / k];
  return {
    k,
    x: place(bounds.x, bounds.x + width, k, view.width, view.width / 2 - fx * k),
    y: place(bounds.y, bounds.y + height, k, view.height, view.height / 2 - fy * k),
    partial,
  };
}

/**
 * The transform {x, y, k} that shows all of `bounds` in a `view`, centred, however small its text gets (Fit; the
 * wheel zooms in): never blown up past 1.2.
 * @param {Bounds} bounds
 * @param {Size} view
 */
export function wholeTransform(bounds, view) {
  const width = Math.max(1, bounds.width || 1);
  const height = Math.max(1, bounds.height || 1);
  const k = Math.min(MAX_FIT_SCALE, Math.max(1e-3, view.width - PAD) / width, Math.max(1e-3, view.height - PAD) / height);
  return {
    k,
    x: view.width / 2 - (bounds.x + width / 2) * k,
    y: view.height / 2 - (bounds.y + height / 2) * k,
  };
}

/**
 * Whether any part of `bounds` lies outside the view under transform {x, y, k}.
 * @param {Bounds} bounds
 * @param {Transform} transform
 * @param {Size} view
 */
export function overflows(bounds, transform, view) {
  const { x, y, k } = transform;
  const left = x + bounds.x * k;
  const top = y + bounds.y * k;
  return left < -0.5 || top < -0.5 || left + bounds.width * k > view.width + 0.5 || top + bounds.height * k > view.height + 0.5;
}

/**
 * The minimap's size and scales for `bounds` within a `max` box ({width, height}): {width, height, sx, sy}.
 * One scale for both axes, except that neither side gets thinner than `least` px (a tall, narrow graph is
 * stretched across rather than drawn as a line).
 * @param {Bounds} bounds
 * @param {Size} max
 * @returns {MapSize}
 */
export function minimapSize(bounds, max, least = 48) {
  const width = Math.max(1, bounds.width);
  const height = Math.max(1, bounds.height);
  const scale = Math.min(max.width / width, max.height / height);
  const sx = Math.min(max.width / width, Math.max(scale, least / width));
  const sy = Math.min(max.height / height, Math.max(scale, least / height));
  return { width: width * sx, height: height * sy, sx, sy };
}

/**
 * The view's rectangle on a minimap of `map` ({width, height, sx, sy}), clipped to the map: {x, y, width, height}.
 * @param {Bounds} bounds
 * @param {Transform} transform
 * @param {Size} view
 * @param {MapSize} map
 */
export function minimapViewport(bounds, transform, view, map) {
  const { x, y, k } = transform;
  const left = (-x / k - bounds.x) * map.sx;
  const top = (-y / k - bounds.y) * map.sy;
  const right = left + (view.width / k) * map.sx;
  const bottom = top + (view.height / k) * map.sy;
  const clip = (/** @type {number} */ v, /** @type {number} */ limit) => Math.max(0, Math.min(limit, v));
  const [x0, y0, x1, y1] = [clip(left, map.width), clip(top, map.height), clip(right, map.width), clip(bottom, map.height)];
  return { x: x0, y: y0, width: x1 - x0, height: y1 - y0 };
}

/**
 * The layout point [x, y] under a point (px, py) of the minimap.
 * @param {Bounds} bounds
 * @param {MapSize} map
 * @param {number} px
 * @param {number} py
 */
export function minimapPoint(bounds, map, px, py) {
  return [bounds.x + px / map.sx, bounds.y + py / map.sy];
}
