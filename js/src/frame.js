/** The figure pane the page reports to the kernel (the `frame` traitlet): when a new measure is worth a redraw; pure. */

/** @typedef {import("./payloads.js").Frame} Frame */

/** A width change smaller than this (CSS px) redraws nothing: a scrollbar coming and going, a border. */
export const MIN_WIDTH_CHANGE = 8;

/**
 * The frame of a pane `width` CSS px wide on a screen of `ratio` device pixels per CSS pixel (whole pixels; a
 * missing or odd ratio is 1).
 * @param {number} width
 * @param {number} ratio
 * @returns {Frame}
 */
export function measuredFrame(width, ratio) {
  return { width: Math.max(0, Math.floor(width)), ratio: Number.isFinite(ratio) && ratio > 0 ? ratio : 1 };
}

/**
 * Whether `next` is worth telling the kernel after `shown`: the ratio changed, or the width by 8 px or more (a
 * width of 0, a pane not laid out, never is).
 * @param {Partial<Frame> | null | undefined} shown
 * @param {Frame} next
 */
export function frameChanged(shown, next) {
  if (next.width <= 0) return false;
  if (!shown || !(Number(shown.width) > 0)) return true;
  return next.ratio !== shown.ratio || Math.abs(next.width - Number(shown.width)) >= MIN_WIDTH_CHANGE;
}
