/** The layout engine's bundled source (layout_engine.js with dagre), inlined by js/build.mjs; absent under `node --test`. */

/* global __HW_LAYOUT_ENGINE__ */
export const ENGINE_SOURCE = typeof __HW_LAYOUT_ENGINE__ === "string" ? __HW_LAYOUT_ENGINE__ : null;

/**
 * A Blob URL of the engine, to start a worker from; the caller revokes it.
 * @param {string | null} [source]
 */
export function engineURL(source = ENGINE_SOURCE) {
  return URL.createObjectURL(new Blob([/** @type {string} */ (source)], { type: "text/javascript" }));
}

/** @type {Promise<typeof import("./layout_engine.js")> | null} */
let imported = null;

/** The engine module on the page, imported once from a Blob URL, as anywidget imports the widget itself. */
export function importEngine() {
  if (!ENGINE_SOURCE) return Promise.reject(new Error("the graph layout engine is not bundled: build js/ first"));
  imported ??= (async () => {
    const url = engineURL();
    try {
      return await import(/* webpackIgnore: true */ url);
    } finally {
      URL.revokeObjectURL(url);
    }
  })();
  imported.catch(() => {
    imported = null; // a later layout tries again
  });
  return imported;
}
