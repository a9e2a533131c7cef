/** Small DOM helpers: every string goes in as text or as an attribute value, never as markup. */

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
