/**
 * Small DOM helpers: every string goes in as text or as an attribute value, never as markup, and every
 * text a person reads (content, title, aria-label, alt) with its invisible characters escaped (`visibleText`).
 */

import { toBytes } from "../bytes.js";
import { visibleText } from "../format.js";

// Attributes people read: tooltips and what assistive technology says. Others (data-path…) keep the real value.
const READ_ATTRIBUTES = new Set(["title", "aria-label", "alt"]);

/**
 * An attribute's value: null, undefined and false leave it out, true sets it empty.
 * @typedef {string | number | boolean | null | undefined} AttrValue
 */
/** `h`'s options. @typedef {{cls?: string, attrs?: Record<string, AttrValue>, text?: unknown}} Options */

/**
 * Set an attribute, its value escaped when people read it.
 * @param {Element} node
 * @param {string} name
 * @param {unknown} value
 */
export function setAttr(node, name, value) {
  const text = String(value);
  node.setAttribute(name, READ_ATTRIBUTES.has(name) ? visibleText(text) : text);
}

/**
 * Set the text a node shows (null and undefined show nothing).
 * @param {Node} node
 * @param {unknown} text
 */
export function setText(node, text) {
  node.textContent = visibleText(text ?? "");
}

/**
 * A text node of `text`, for mixing with elements.
 * @param {unknown} text
 */
export function textNode(text) {
  return document.createTextNode(visibleText(text));
}

/**
 * Create `<tag>` with a class, attributes, text and children.
 * opts: {cls, attrs: {name: value}, text}; attributes with null/undefined/false values are skipped.
 * @template {keyof HTMLElementTagNameMap} K
 * @param {K} tag
 * @param {Options} [opts]
 * @param {(Node | string | null | undefined | false)[]} [children]
 * @returns {HTMLElementTagNameMap[K]}
 */
export function h(tag, opts = {}, children = []) {
  const node = document.createElement(tag);
  if (opts.cls) node.className = opts.cls;
  for (const [name, value] of Object.entries(opts.attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    setAttr(node, name, value === true ? "" : value);
  }
  if (opts.text !== undefined && opts.text !== null) setText(node, opts.text);
  for (const child of children) if (child) node.append(child);
  return node;
}

/**
 * Subscribe `callback` to several model events; returns the function that unsubscribes it.
 * @param {import("../widget_model.js").WidgetModel} model
 * @param {import("../widget_model.js").ChangeEvent[]} events
 * @param {() => void} callback
 */
export function subscribe(model, events, callback) {
  for (const event of events) model.on(event, callback);
  return () => {
    for (const event of events) model.off(event, callback);
  };
}

/**
 * Add a DOM listener; returns the function that removes it.
 * @template {keyof HTMLElementEventMap} T
 * @param {EventTarget} target
 * @param {T} type
 * @param {(event: HTMLElementEventMap[T]) => void} handler
 */
export function listen(target, type, handler) {
  const listener = /** @type {EventListener} */ (handler); // `type` names the event the handler gets
  target.addEventListener(type, listener);
  return () => target.removeEventListener(type, listener);
}

/**
 * Blob URLs for PNG bytes, revoked together: `url(png)` makes one (null for no bytes), `show(img, png)`
 * puts the image in `img` or hides it, `revoke()` frees every URL made so far (on redraw and destroy).
 */
export function pngUrls() {
  /** @type {string[]} */
  let urls = [];
  return {
    /** @param {DataView | null | undefined} png */
    url(png) {
      const bytes = png ? toBytes(png) : null;
      if (!bytes || bytes.byteLength === 0) return null;
      // ipywidgets' buffers are ArrayBuffers, never shared memory, which a Blob refuses.
      const part = /** @type {Uint8Array<ArrayBuffer>} */ (bytes);
      const url = URL.createObjectURL(new Blob([part], { type: "image/png" }));
      urls.push(url);
      return url;
    },
    /**
     * @param {HTMLImageElement} img
     * @param {DataView | null | undefined} png
     */
    show(img, png) {
      const url = this.url(png);
      if (url) {
        img.src = url;
        img.hidden = false;
      } else {
        img.removeAttribute("src");
        img.hidden = true;
      }
    },
    revoke() {
      for (const url of urls) URL.revokeObjectURL(url);
      urls = [];
    },
  };
}

/**
 * The header row of a sortable table: `columns` are [key, title]; the sorted one has aria-sort and an arrow.
 * @param {[string, string][]} columns
 * @param {{field: string, descending: boolean}} sort
 */
export function sortableHeader(columns, sort) {
  return h(
    "tr",
    {},
    columns.map(([key, title]) =>
      h("th", {
        attrs: {
          "data-field": key,
          "aria-sort": sort.field === key ? (sort.descending ? "descending" : "ascending") : null,
          title: "sort",
        },
        text: sort.field === key ? `${title} ${sort.descending ? "▾" : "▴"}` : title,
      }),
    ),
  );
}

/**
 * Call `callback` after the page's theme changes (JupyterLab and Notebook mark it on `<body>`), once the new
 * styles apply; returns the function that stops watching. Colours computed from the page's background use it.
 * @param {() => void} callback
 */
export function onThemeChange(callback) {
  if (typeof MutationObserver === "undefined" || !document.body) return () => {};
  /** @type {number | null} */
  let frame = null;
  const observer = new MutationObserver(() => {
    if (frame === null) frame = requestAnimationFrame(() => ((frame = null), callback()));
  });
  observer.observe(document.body, { attributes: true, attributeFilter: ["data-jp-theme-light", "data-jp-theme-name", "class"] });
  return () => {
    observer.disconnect();
    if (frame !== null) cancelAnimationFrame(frame);
  };
}
