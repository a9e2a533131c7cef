/** A grid of values drawn on a canvas at the screen's pixel ratio, its value under the mouse read from the values sent
 * with it (no kernel round trip), a click picking a cell; redrawn on resize, theme and pixel-ratio changes. */

import { fitLeft, integerColumns, rowLabel, stepTicks, thinIndices, withRow } from "../axis_labels.js";
import { axisLabel, cellAt, cellColor, cellText, colorScale, decodeGrid, gridHeight, rampCss } from "../grid.js";
import { formatStat } from "../summary.js";
import { pageTheme } from "../theme.js";
import { h, listen, onThemeChange, setText } from "./dom.js";

/**
 * Build a grid view; `onPick(row, column)` is called on a click on a cell. Returns {el, show, destroy}: `show(grid,
 * field, options)` draws a grid payload (`highlightRow`, `highlightColumn`: outlined, e.g. the selected layer's row
 * and the chosen step's column).
 * @param {{cls: string, label: string, hint: string, onPick: (row: number, column: number) => void}} options
 */
export function createGridCanvas({ cls, label, hint, onPick }) {
  const title = h("div", { cls: "hw-grid-title" });
  const canvas = h("canvas", { cls: "hw-grid-canvas", attrs: { role: "img", "aria-label": label } });
  const first = h("span", { cls: "hw-grid-first" });
  const last = h("span", { cls: "hw-grid-last" });
  const ticks = h("div", { cls: "hw-grid-ticks" });
  const axis = h("div", { cls: "hw-grid-axis" }, [first, last, ticks]);
  // The rows' names beside the canvas, as text (a model's names are never markup), thinned to fit the row height.
  const rowLabels = h("div", { cls: "hw-grid-rows", attrs: { "aria-hidden": "true" } });
  const plot = h("div", { cls: "hw-grid-plot" }, [rowLabels, canvas, h("span"), axis]);
  const readout = h("div", { cls: "hw-grid-readout", attrs: { "aria-live": "polite" }, text: hint });
  const low = h("span", { cls: "hw-grid-low" });
  const high = h("span", { cls: "hw-grid-high" });
  const ramp = h("span", { cls: "hw-grid-ramp", attrs: { "aria-hidden": "true" } });
  ramp.style.background = rampCss();
  const legend = h("div", { cls: "hw-grid-legend" }, [
    low,
    ramp,
    high,
    h("span", { cls: "hw-grid-key hw-grid-key-nonfinite", attrs: { "aria-hidden": "true" } }),
    h("span", { text: "NaN/Inf" }),
    h("span", { cls: "hw-grid-key hw-grid-key-missing", attrs: { "aria-hidden": "true" } }),
    h("span", { text: "no record" }),
  ]);
  const el = h("div", { cls: `hw-grid ${cls}` }, [title, plot, readout, legend]);
  /** @type {import("../grid.js").Decoded} */
  let decoded = decodeGrid(null);
  let field = "";
  /** @type {number | null} */
  let highlightRow = null;
  /** @type {number | null} */
  let highlightColumn = null;
  /** @type {number | null} */
  let frame = null;

  function isDark() {
    const root = el.closest(".hw-explorer") ?? el;
    const style = getComputedStyle(root);
    return pageTheme({ jpThemeLight: document.body?.dataset.jpThemeLight, background: style.backgroundColor }).name === "dark";
  }

  function draw() {
    frame = null;
    const { rows, columns, values, flags, grid } = decoded;
    el.hidden = rows === 0 || columns === 0;
    if (el.hidden) return;
    const cssHeight = gridHeight(rows);
    canvas.style.height = `${cssHeight}px`;
    drawRowLabels(cssHeight);
    drawTicks();
    const cssWidth = canvas.clientWidth;
    if (cssWidth === 0) return; // not in the page yet: the resize observer draws once it is
    const ratio = window.devicePixelRatio || 1;
    const width = Math.round(cssWidth * ratio);
    const height = Math.round(cssHeight * ratio);
    if (canvas.width !== width) canvas.width = width;
    if (canvas.height !== height) canvas.height = height;
    const context = canvas.getContext("2d");
    if (!context) return;
    const scale = colorScale(values, flags);
    const dark = isDark();
    // Each cell filled over whole device pixels: edges at rounded positions, so cells tile without gaps or blur.
    const xs = Array.from({ length: columns + 1 }, (_, j) => Math.round((j * width) / columns));
    const ys = Array.from({ length: rows + 1 }, (_, i) => Math.round((i * height) / rows));
    const image = context.createImageData(width, height);
    for (let i = 0; i < rows; i++) {
      for (let j = 0; j < columns; j++) {
        const k = i * columns + j;
        const [r, g, b] = cellColor(values[k], flags[k], scale, dark);
        for (let y = ys[i]; y < ys[i + 1]; y++) {
          let at = (y * width + xs[j]) * 4;
          for (let x = xs[j]; x < xs[j + 1]; x++, at += 4) {
            image.data[at] = r;
            image.data[at + 1] = g;
            image.data[at + 2] = b;
            image.data[at + 3] = 255;
          }
        }
      }
    }
    context.putImageData(image, 0, 0);
    const foreground = getComputedStyle(el).color;
    const outline = (/** @type {number} */ i0, /** @type {number} */ i1, /** @type {number} */ j0, /** @type {number} */ j1) => {
      const inset = ratio; // inside the canvas, so the outline of an edge cell is whole
      context.strokeRect(xs[j0] + inset, ys[i0] + inset, Math.max(1, xs[j1] - xs[j0] - 2 * inset), Math.max(1, ys[i1] - ys[i0] - 2 * inset));
    };
    context.strokeStyle = foreground;
    context.lineWidth = ratio;
    if (highlightRow !== null && highlightRow < rows) outline(highlightRow, highlightRow + 1, 0, columns);
    if (highlightColumn !== null && highlightColumn < columns) outline(0, rows, highlightColumn, highlightColumn + 1);
    const mark = grid.mark;
    if (Array.isArray(mark) && mark[0] < rows && mark[1] < columns) {
      context.strokeStyle = foreground;
      context.lineWidth = 2 * ratio;
      outline(mark[0], mark[0] + 1, mark[1], mark[1] + 1);
    }
    setText(low, scale.low === null ? "" : formatStat(field, scale.low));
    setText(high, scale.high === null ? "" : `${formatStat(field, scale.high)}${scale.log ? " (log)" : ""}`);
  }

  /** @type {CanvasRenderingContext2D | null} */
  let measurer = null;

  /**
   * Label the rows that have room (13 px apart), each cut from the left to the column's width: at most a third of
   * the grid's, so the cells keep most of a narrow pane; the full name is the label's tooltip.
   * @param {number} cssHeight
   */
  function drawRowLabels(cssHeight) {
    const { grid, rows } = decoded;
    const names = Array.from({ length: rows }, (_, i) => rowLabel(grid.row_name, grid.rows?.[i]));
    // The outlined row (the selected layer) is always named: the label a user looks for after picking it.
    const shown = withRow(thinIndices(rows, cssHeight, 13), highlightRow, cssHeight / rows, 13);
    measurer ??= document.createElement("canvas").getContext("2d");
    const style = getComputedStyle(rowLabels);
    if (measurer) measurer.font = `${style.fontSize} ${style.fontFamily}`;
    const measure = (/** @type {string} */ text) => (measurer ? measurer.measureText(text).width : text.length * 7);
    const room = Math.max(0, Math.min(220, el.clientWidth / 3) - 6);
    const width = Math.ceil(Math.min(room, Math.max(0, ...shown.map((i) => measure(names[i])))));
    rowLabels.style.width = `${width + 6}px`;
    rowLabels.style.height = `${cssHeight}px`;
    rowLabels.replaceChildren(
      ...shown.map((i) => {
        const label = h("span", { cls: "hw-grid-rowlabel", attrs: { title: names[i], "data-row": i } });
        setText(label, fitLeft(names[i], width, measure));
        // Centred on its row, but kept whole inside the canvas's height (the first and last of thin rows).
        label.style.top = `${Math.min(cssHeight - 6, Math.max(6, ((i + 0.5) * cssHeight) / rows))}px`;
        return label;
      }),
    );
  }

  /** Integer columns (steps) get ticks under their column at round steps 36 px apart; others their first and last. */
  function drawTicks() {
    const { grid, columns } = decoded;
    const stepped = integerColumns(grid.columns);
    first.hidden = stepped;
    last.hidden = stepped;
    ticks.hidden = !stepped;
    if (!stepped) return ticks.replaceChildren();
    ticks.replaceChildren(
      ...stepTicks((grid.columns ?? []).map(Number), canvas.clientWidth, 36).map((j) => {
        const tick = h("span", { cls: "hw-grid-tick", attrs: { "data-column": j } });
        setText(tick, grid.columns?.[j]);
        tick.style.left = `${((j + 0.5) * 100) / columns}%`;
        return tick;
      }),
    );
  }

  function schedule() {
    if (frame === null) frame = requestAnimationFrame(draw);
  }

  /** @param {PointerEvent} event */
  function cellOf(event) {
    return cellAt(event.offsetX, event.offsetY, canvas.clientWidth, canvas.clientHeight, decoded.rows, decoded.columns);
  }

  /** @param {PointerEvent} event */
  function onMove(event) {
    const cell = cellOf(event);
    setText(readout, cell ? cellText(decoded, cell.row, cell.column, field) : hint);
  }

  /** @param {MouseEvent} event */
  function onClick(event) {
    const cell = cellOf(/** @type {PointerEvent} */ (event));
    if (cell) onPick(cell.row, cell.column);
  }

  // A new pixel ratio (the window moved to another screen, the page zoomed) redraws at the new one.
  /** @type {MediaQueryList | null} */
  let ratioQuery = null;
  const onRatio = () => {
    watchRatio();
    schedule();
  };
  function watchRatio() {
    ratioQuery?.removeEventListener("change", onRatio);
    ratioQuery = typeof matchMedia === "function" ? matchMedia(`(resolution: ${window.devicePixelRatio || 1}dppx)`) : null;
    ratioQuery?.addEventListener("change", onRatio);
  }
  watchRatio();
  const resize = typeof ResizeObserver === "function" ? new ResizeObserver(schedule) : null;
  resize?.observe(el);
  const offs = [
    listen(canvas, "pointermove", onMove),
    listen(canvas, "pointerleave", () => setText(readout, hint)),
    listen(canvas, "click", onClick),
    onThemeChange(schedule),
  ];
  return {
    el,
    /**
     * @param {Partial<import("../payloads.js").Grid> | null | undefined} grid
     * @param {string} shownField
     * @param {{highlightRow?: number | null, highlightColumn?: number | null}} [options]
     */
    show(grid, shownField, options = {}) {
      decoded = decodeGrid(grid);
      field = shownField;
      highlightRow = options.highlightRow ?? null;
      highlightColumn = options.highlightColumn ?? null;
      setText(title, grid?.title ?? "");
      const columnLabel = (/** @type {number} */ j) => axisLabel(grid?.column_name, grid?.columns?.[j]);
      setText(first, decoded.columns > 0 ? columnLabel(0) : "");
      setText(last, decoded.columns > 1 ? columnLabel(decoded.columns - 1) : "");
      draw();
    },
    /** The payload shown, decoded (what hover reads). */
    get decoded() {
      return decoded;
    },
    destroy() {
      offs.forEach((off) => off());
      resize?.disconnect();
      ratioQuery?.removeEventListener("change", onRatio);
      if (frame !== null) cancelAnimationFrame(frame);
    },
  };
}
