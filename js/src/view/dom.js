/** Small DOM helpers: every string goes in as text or as an attribute value, never as markup. */

import { toBytes } from "../bytes.js";

/**
 * Create `<tag>` with a class, attributes, text and children.
 * opts: {cls, attrs: {name: value}, text}; attributes with null/undefined/false values are skipped.
 */
export function h(tag, opts = {}, children = []) {
  const node = document.createElement(tag);
  if (opts.cls) node.className = opts.cls;
  for (const [name, value] of Object.entries(opts.attrs ?? {})) {
    if (value === null || value === undefined || value === false) continue;
    node.setAttribute(name, value === true ? "" : String(value));
  }
  if (opts.text !== undefined && opts.text !== null) node.textContent = String(opts.text);
  for (const child of children) if (child) node.append(child);
  return node;
}

/** Subscribe `callback` to several model events; returns the function that unsubscribes it. */
export function subscribe(model, events, callback) {
  for (const event of events) model.on(event, callback);
  return () => {
    for (const event of events) model.off(event, callback);
  };
}

/** Add a DOM listener; returns the function that removes it. */
export function listen(target, type, handler) {
  target.addEventListener(type, handler);
  return () => target.removeEventListener(type, handler);
}

/**
 * Blob URLs for PNG bytes, revoked together: `url(png)` makes one (null for no bytes), `show(img, png)`
 * puts the image in `img` or hides it, `revoke()` frees every URL made so far (on redraw and destroy).
 */
export function pngUrls() {
  let urls = [];
  return {
    url(png) {
      const bytes = png ? toBytes(png) : null;
      if (!bytes || bytes.byteLength === 0) return null;
      const url = URL.createObjectURL(new Blob([bytes], { type: "image/png" }));
      urls.push(url);
      return url;
    },
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

/** The header row of a sortable table: `columns` are [key, title]; the sorted one has aria-sort and an arrow. */
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
