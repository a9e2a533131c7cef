/**
 * The layout engine, the one module that bundles dagre (js/build.mjs builds it on its own and embeds it in the widget):
 * run as the layout worker, or imported by the page to lay out in chunks where no worker can start.
 */

import { computeLayout, layoutSteps } from "./layout.js";
import { packLayout } from "./layout_pack.js";

export { computeLayout, layoutSteps };

/**
 * What the worker posts back: a request's packed layout or its error, or that it runs.
 * @typedef {{id: number, packed: import("./layout_pack.js").PackedLayout, error?: undefined, ready?: undefined}
 *   | {id: number, error: string, packed?: undefined, ready?: undefined} | {ready: true, id?: undefined}} LayoutAnswer
 */

/**
 * Answer one posted request through `post(message, transfer)`: its layout in transferable arrays, or the error.
 * @param {{id: number, request: import("./layout_request.js").LayoutRequest}} message
 * @param {(message: LayoutAnswer, transfer?: Transferable[]) => void} post
 */
export function answer({ id, request }, post) {
  try {
    const packed = packLayout(request, computeLayout(request));
    post({ id, packed }, [packed.rects.buffer, packed.points.buffer, packed.offsets.buffer]);
  } catch (error) {
    post({ id, error: String(/** @type {Error} */ (error)?.stack ?? error) });
  }
}

// In a worker, serve requests; first say so, since a worker that cannot run here (a CSP refusing blob: workers)
// reports only an error event, which the page must tell apart from a layout failing later.
if (typeof WorkerGlobalScope !== "undefined" && self instanceof WorkerGlobalScope) {
  // lib "dom" types `self` as a window; a worker's scope posts and receives as a Worker object does.
  const scope = /** @type {Worker} */ (/** @type {unknown} */ (self));
  scope.onmessage = (event) => answer(event.data, (message, transfer) => scope.postMessage(message, transfer ?? []));
  scope.postMessage({ ready: true });
}
