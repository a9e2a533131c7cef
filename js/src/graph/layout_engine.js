/**
 * The layout engine, the one module that bundles dagre (js/build.mjs builds it on its own and embeds it in the widget):
 * run as the layout worker, or imported by the page to lay out in chunks where no worker can start.
 */

import { computeLayout, layoutSteps } from "./layout.js";
import { packLayout } from "./layout_pack.js";

export { computeLayout, layoutSteps };

/** Answer one posted request through `post(message, transfer)`: its layout in transferable arrays, or the error. */
export function answer({ id, request }, post) {
  try {
    const packed = packLayout(request, computeLayout(request));
    post({ id, packed }, [packed.rects.buffer, packed.points.buffer, packed.offsets.buffer]);
  } catch (error) {
    post({ id, error: String(error?.stack ?? error) });
  }
}

// In a worker, serve requests; first say so, since a worker that cannot run here (a CSP refusing blob: workers)
// reports only an error event, which the page must tell apart from a layout failing later.
if (typeof WorkerGlobalScope !== "undefined" && self instanceof WorkerGlobalScope) {
  self.onmessage = (event) => answer(event.data, (message, transfer) => self.postMessage(message, transfer));
  self.postMessage({ ready: true });
}
